#include "core/elementwise.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/kernels/fast.h"

namespace headlab::ew {

void scale(const float* x, int64_t n, float alpha, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i];
}

void axpy(const float* x, int64_t n, float alpha, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void add_broadcast(const float* a, int64_t n, const float* b, int64_t nb, float alpha, float* out) {
  if (nb == 0) return;
  for (int64_t base = 0; base < n; base += nb)
    for (int64_t j = 0; j < nb; ++j) out[base + j] = a[base + j] + alpha * b[j];
}

void mul_broadcast(const float* a, int64_t n, const float* b, int64_t nb, float* out) {
  if (nb == 0) return;
  for (int64_t base = 0; base < n; base += nb)
    for (int64_t j = 0; j < nb; ++j) out[base + j] = a[base + j] * b[j];
}

// Column sums walk the rows in order (cache friendly) for a block of columns at a time, with
// the block's accumulators in double on the stack.
namespace {
constexpr int64_t kBlock = 64;

template <class Term>
void column_sums(int64_t rows, int64_t cols, float alpha, float* out, Term term) {
  std::array<double, kBlock> acc;
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    const int64_t w = std::min(kBlock, cols - j0);
    std::fill_n(acc.begin(), w, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < w; ++j) acc[j] += term(r * cols + j0 + j);
    for (int64_t j = 0; j < w; ++j) out[j0 + j] = static_cast<float>(alpha * acc[j]);
  }
}
}  // namespace

void sum_rows(const float* x, int64_t rows, int64_t cols, float alpha, float* out) {
  column_sums(rows, cols, alpha, out, [x](int64_t i) { return static_cast<double>(x[i]); });
}

void sum_rows_product(const float* a, const float* b, int64_t rows, int64_t cols, float* out) {
  column_sums(rows, cols, 1.0f, out,
              [a, b](int64_t i) { return static_cast<double>(a[i]) * static_cast<double>(b[i]); });
}

double sum(const float* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += x[i];
  return acc;
}

void detail::argmax_rows_portable(const float* x, int64_t rows, int64_t cols, int32_t* out) {
  // A row's maximum in 16 independent lanes (no comparison waits on the one before), then the
  // first element equal to it: what the compare-and-keep walk of std::max_element finds, 5x
  // faster on the classifier's rows (it ran once per evaluated token; the AVX-512 build,
  // fast::argmax_rows, 19x). A NaN never wins a comparison, so it is skipped as max_element
  // skips it, unless it comes first, where max_element keeps it.
  constexpr int kLanes = 16;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    int64_t best = 0;
    if (!std::isnan(row[0])) {
      float lane[kLanes];
      std::fill_n(lane, kLanes, row[0]);
      int64_t c = 0;
      for (; c + kLanes <= cols; c += kLanes)
        for (int j = 0; j < kLanes; ++j) lane[j] = lane[j] < row[c + j] ? row[c + j] : lane[j];
      float m = row[0];
      for (float v : lane) m = m < v ? v : m;
      for (; c < cols; ++c) m = m < row[c] ? row[c] : m;
      while (row[best] != m) ++best;  // m is a value of the row
    }
    out[r] = static_cast<int32_t>(best);
  }
}

void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out) {
  if (fast::avx512_enabled()) return fast::argmax_rows(x, rows, cols, out);
  detail::argmax_rows_portable(x, rows, cols, out);
}

void swap_middle_dims(const float* x, int64_t n0, int64_t n1, int64_t n2, int64_t n3, float* out) {
  // x[i, j, k, :] -> out[i, k, j, :]; rows of n3 floats move as a block.
  for (int64_t i = 0; i < n0; ++i)
    for (int64_t j = 0; j < n1; ++j)
      for (int64_t k = 0; k < n2; ++k) {
        const float* src = x + ((i * n1 + j) * n2 + k) * n3;
        float* dst = out + ((i * n2 + k) * n1 + j) * n3;
        if (n3 == 1)
          *dst = *src;
        else
          std::memcpy(dst, src, sizeof(float) * n3);
      }
}

void gather_rows(const float* table, int64_t dim, const int32_t* ids, int64_t n, float* out) {
  if (dim == 0) return;
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * dim, table + static_cast<int64_t>(ids[i]) * dim, sizeof(float) * dim);
}

static_assert(sizeof(float) == sizeof(int32_t));

void store_ids(const int32_t* ids, int64_t n, float* bits) {
  if (n > 0) std::memcpy(bits, ids, sizeof(int32_t) * n);
}

int32_t load_id(const float* bits, int64_t i) {
  int32_t id;
  std::memcpy(&id, bits + i, sizeof(id));
  return id;
}

void scatter_add_rows(const float* src, int64_t dim, const float* id_bits, int64_t n,
                      float* table) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = table + static_cast<int64_t>(load_id(id_bits, i)) * dim;
    const float* s = src + i * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += s[j];
  }
}

namespace {

// Calls row(base, mask_offset, mask_inner) for each row of `cols` = shape[-1] elements of a
// tensor of `shape` (rank >= 1), in order: base is the row's first element, and the mask value
// of its element j is mask[mask_offset + j * mask_inner] (mask_shape has shape's rank; each of
// its dims equals shape's or is 1, a broadcast).
template <class Row>
void for_each_masked_row(const Shape& shape, const Shape& mask_shape, Row row) {
  const int rank = shape.rank();
  // Stride of each mask dim in the mask's buffer, 0 where it broadcasts.
  std::array<int64_t, Shape::kMaxRank> mstride{};
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    mstride[d] = mask_shape[d] == 1 ? 0 : s;
    s *= mask_shape[d];
  }
  const int64_t n = shape.numel(), cols = shape[rank - 1];
  std::array<int64_t, Shape::kMaxRank> idx{};  // odometer over the leading dims
  for (int64_t base = 0; base < n; base += cols) {
    int64_t moff = 0;
    for (int d = 0; d < rank - 1; ++d) moff += idx[d] * mstride[d];
    row(base, moff, mstride[rank - 1]);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

void masked_fill(const float* x, const Shape& x_shape, const float* mask, const Shape& mask_shape,
                 float value, float* out) {
  if (x_shape.numel() == 0) return;
  if (x_shape.rank() == 0) {
    out[0] = mask[0] != 0.0f ? value : x[0];
    return;
  }
  const int64_t cols = x_shape[-1];
  for_each_masked_row(x_shape, mask_shape, [&](int64_t base, int64_t moff, int64_t inner) {
    for (int64_t j = 0; j < cols; ++j)
      out[base + j] = mask[moff + j * inner] != 0.0f ? value : x[base + j];
  });
}

void select(const float* mask, const Shape& mask_shape, const float* a, const float* b,
            const Shape& shape, float* out) {
  if (shape.numel() == 0) return;
  if (shape.rank() == 0) {
    out[0] = mask[0] != 0.0f ? a[0] : b[0];
    return;
  }
  const int64_t cols = shape[-1];
  for_each_masked_row(shape, mask_shape, [&](int64_t base, int64_t moff, int64_t inner) {
    if (inner == 0) {  // one mask value for the whole row (a head's slice, a position): a copy
      std::memcpy(out + base, (mask[moff] != 0.0f ? a : b) + base,
                  static_cast<size_t>(cols) * sizeof(float));
      return;
    }
    for (int64_t j = 0; j < cols; ++j)
      out[base + j] = mask[moff + j * inner] != 0.0f ? a[base + j] : b[base + j];
  });
}

// Rng::uniform() < p, without a branch (a 30% coin defeats the branch predictor): uniform() is
// u * 2^-24 for the integer u = next_u64() >> 40, exactly, so it is below p exactly when u is
// below ceil(p * 2^24) (p * 2^24 is exact in double).
void dropout_mask(Rng& rng, float p, float* mask, int64_t n) {
  const float keep_scale = 1.0f / (1.0f - p);
  const auto threshold = static_cast<uint64_t>(std::ceil(static_cast<double>(p) * 0x1.0p24));
  const uint32_t keep_bits = std::bit_cast<uint32_t>(keep_scale);
  Rng local = rng;  // the state in registers, not reloaded after every store to mask
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t u = local.next_u64() >> 40;
    mask[i] = std::bit_cast<float>(keep_bits & (0u - static_cast<uint32_t>(u >= threshold)));
  }
  rng = local;
}

void dropout_mask(SampleRng& rng, float p, float* mask, int64_t rows, int64_t n) {
  HEADLAB_ASSERT(rows >= 1 && n % rows == 0);
  const uint64_t site = rng.next_site();
  const int64_t per_row = n / rows;
  int64_t r = 0;
  if (fast::avx512_enabled()) {  // eight rows' generators side by side, the same draws
    for (; r + 8 <= rows; r += 8) {
      Rng group[8];
      for (int l = 0; l < 8; ++l) group[l] = rng.row(site, static_cast<uint64_t>(r + l));
      fast::dropout_rows8(group, p, mask + r * per_row, per_row, per_row);
    }
  }
  for (; r < rows; ++r) {
    Rng row = rng.row(site, static_cast<uint64_t>(r));
    dropout_mask(row, p, mask + r * per_row, per_row);
  }
}

}  // namespace headlab::ew
