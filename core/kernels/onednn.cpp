// The onednn flavour of FastKernels: softmax and log-softmax backward, layer normalization and
// eltwise primitives (oneDNN 2.x operation-descriptor API), cached per shape in onednn_cache.h;
// where the CPU has AVX-512 the softmax and log-softmax forwards (fast_softmax.cpp) and the
// layer normalization (fast_layer_norm.cpp) by headlab's vectorized loops instead; matrix
// products by headlab's own GEMM where the CPU has AVX-512 (gemm.h: faster than oneDNN's
// matmul at these shapes, allocation-free, and beta = 1 adds exactly the beta = 0 result),
// oneDNN's matmul primitive elsewhere; at Precision::bf16, single products by headlab's bf16
// GEMM (simd/gemm.h).

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/kernels/backends.h"
#include "core/kernels/fast.h"
#include "core/kernels/onednn_cache.h"
#include "core/kernels/simd/gemm.h"

namespace headlab {
namespace {

using dnnl::memory;
using onednn::Entry;
using onednn::f32_desc;
using onednn::Key;
using onednn::Op;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Key make_key(Op op, uint32_t flags, std::initializer_list<int64_t> dims, float f0 = 0.0f,
             float f1 = 0.0f) {
  Key k;
  k.op = op;
  k.flags = flags;
  k.f0 = f0;
  k.f1 = f1;
  std::copy(dims.begin(), dims.end(), k.dims.begin());
  k.threads = onednn::threads_for(k);
  return k;
}

// The transposes are strides: op(A) = A^T of a row-major [k, m] with row stride lda is the
// [m, k] matrix with strides (1, lda). Batch items are `stride` apart.
memory::desc matrix_desc(int64_t batch, int64_t rows, int64_t cols, bool transposed, int64_t ld,
                         int64_t stride) {
  const memory::dims inner = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  if (batch == 1) return f32_desc({rows, cols}, inner);
  return f32_desc({batch, rows, cols}, {stride, inner[0], inner[1]});
}

void make_matmul(const GemmDesc& d, Entry& e) {
  const memory::desc a = matrix_desc(d.batch, d.m, d.k, d.trans_a, d.lda, d.stride_a);
  const memory::desc b = matrix_desc(d.batch, d.k, d.n, d.trans_b, d.ldb, d.stride_b);
  const memory::desc c = matrix_desc(d.batch, d.m, d.n, false, d.ldc, d.stride_c);
  // C = alpha * A B + beta * C: alpha is the output scale, beta a sum post-op (which reads C
  // only when present, so beta == 0 never reads C's possibly uninitialised values).
  dnnl::primitive_attr attr = onednn::base_attr();
  if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
  if (d.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(d.beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, onednn::engine());
  e.init(pd, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
}

// C = beta * C, for the k == 0 product that oneDNN need not see.
void scale_only(const GemmDesc& d, float* c) {
  for (int64_t bi = 0; bi < d.batch; ++bi)
    for (int64_t i = 0; i < d.m; ++i) {
      float* row = c + bi * d.stride_c + i * d.ldc;
      for (int64_t j = 0; j < d.n; ++j) row[j] = d.beta == 0.0f ? 0.0f : d.beta * row[j];
    }
}

// oneDNN computes exp(x - max) with max = -inf on a fully masked row and returns NaN there.
// Such a row has a NaN in its first output, so only flagged rows are scanned; a row is
// rewritten only when its input is all -inf (a NaN from a NaN input stays visible).
void fix_masked_rows(const float* x, float* y, int64_t rows, int64_t cols, float fill) {
  for (int64_t r = 0; r < rows; ++r) {
    if (!std::isnan(y[r * cols])) continue;
    const float* xr = x + r * cols;
    if (std::all_of(xr, xr + cols, [](float v) { return v == kNegInf; }))
      std::fill_n(y + r * cols, cols, fill);
  }
}

template <class Fwd>
Entry& softmax_entry(Op op, int64_t rows, int64_t cols) {
  return onednn::cached(make_key(op, 0, {rows, cols}), [&](Entry& e) {
    const memory::desc md = f32_desc({rows, cols});
    const typename Fwd::primitive_desc pd(
        typename Fwd::desc(dnnl::prop_kind::forward_training, md, 1), onednn::base_attr(),
        onednn::engine());
    e.init(pd, {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}});
  });
}

template <class Fwd, class Bwd>
Entry& softmax_backward_entry(Op op, int64_t rows, int64_t cols) {
  return onednn::cached(make_key(op, 0, {rows, cols}), [&](Entry& e) {
    const memory::desc md = f32_desc({rows, cols});
    const typename Fwd::primitive_desc hint(
        typename Fwd::desc(dnnl::prop_kind::forward_training, md, 1), onednn::engine());
    const typename Bwd::primitive_desc pd(typename Bwd::desc(md, md, 1), onednn::base_attr(),
                                          onednn::engine(), hint);
    e.init(pd, {{DNNL_ARG_DST, md}, {DNNL_ARG_DIFF_DST, md}, {DNNL_ARG_DIFF_SRC, md}});
  });
}

dnnl::normalization_flags norm_flags(bool scale, bool shift) {
  auto f = dnnl::normalization_flags::none;
  if (scale) f |= dnnl::normalization_flags::use_scale;
  if (shift) f |= dnnl::normalization_flags::use_shift;
  return f;
}

Entry& eltwise_entry(Op op, dnnl::algorithm algo, int64_t n) {
  return onednn::cached(make_key(op, static_cast<uint32_t>(algo), {n}), [&](Entry& e) {
    const memory::desc md = f32_desc({n});
    const dnnl::eltwise_forward::primitive_desc fwd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algo, md, 0.0f, 0.0f),
        onednn::base_attr(), onednn::engine());
    if (op == Op::eltwise_fwd) {
      e.init(fwd, {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}});
      return;
    }
    const dnnl::eltwise_backward::primitive_desc bwd(
        dnnl::eltwise_backward::desc(algo, md, md, 0.0f, 0.0f), onednn::base_attr(),
        onednn::engine(), fwd);
    e.init(bwd, {{DNNL_ARG_SRC, md}, {DNNL_ARG_DIFF_DST, md}, {DNNL_ARG_DIFF_SRC, md}});
  });
}

// Forward: {x, y}; backward: {x, dy, dx}.
void eltwise(Op op, dnnl::algorithm algo, int64_t n, std::initializer_list<const void*> data) {
  if (n == 0) return;
  eltwise_entry(op, algo, n).execute(data);
}

}  // namespace

size_t onednn_cached_primitives() {
  return onednn::cache_size();
}

void OneDnnKernels::matmul(const GemmDesc& desc, const float* a, const float* b, float* c) const {
  // Batched products (the composed attention's per-head ones, tens of values a side) stay fp32:
  // there, rounding and pairing the operands costs as much as the products.
  if (current_precision() == Precision::bf16 && desc.batch == 1)
    return fast::gemm_bf16(desc, a, b, c);
  if (fast::own_gemm_available()) return fast::gemm(desc, a, b, c);
  GemmDesc d = desc.resolved();
  if (d.m == 0 || d.n == 0 || d.batch == 0) return;
  if (d.k == 0) return scale_only(d, c);
  if (d.batch == 1) d.stride_a = d.stride_b = d.stride_c = 0;  // irrelevant: share one entry
  const uint32_t flags = (d.trans_a ? 1u : 0u) | (d.trans_b ? 2u : 0u);
  const Key key =
      make_key(Op::matmul, flags,
               {d.m, d.n, d.k, d.lda, d.ldb, d.ldc, d.batch, d.stride_a, d.stride_b, d.stride_c},
               d.alpha, d.beta);
  Entry& e = onednn::cached(key, [&](Entry& fresh) { make_matmul(d, fresh); });
  e.execute({a, b, c});
}

void OneDnnKernels::softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const {
  if (rows == 0 || cols == 0) return;
  if (fast::avx512_enabled()) return fast::softmax_rows(x, y, rows, cols);
  softmax_entry<dnnl::softmax_forward>(Op::softmax_fwd, rows, cols).execute({x, y});
  fix_masked_rows(x, y, rows, cols, 0.0f);
}

void OneDnnKernels::softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                     int64_t cols) const {
  if (rows == 0 || cols == 0) return;
  softmax_backward_entry<dnnl::softmax_forward, dnnl::softmax_backward>(Op::softmax_bwd, rows, cols)
      .execute({y, dy, dx});
}

void OneDnnKernels::log_softmax_forward(const float* x, float* y, int64_t rows,
                                        int64_t cols) const {
  if (rows == 0 || cols == 0) return;
  if (fast::avx512_enabled()) return fast::log_softmax_rows(x, y, rows, cols);
  softmax_entry<dnnl::logsoftmax_forward>(Op::log_softmax_fwd, rows, cols).execute({x, y});
  fix_masked_rows(x, y, rows, cols, kNegInf);
}

void OneDnnKernels::log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                         int64_t cols) const {
  if (rows == 0 || cols == 0) return;
  softmax_backward_entry<dnnl::logsoftmax_forward, dnnl::logsoftmax_backward>(Op::log_softmax_bwd,
                                                                              rows, cols)
      .execute({y, dy, dx});
}

// oneDNN saves the variance; the interface saves rstd = 1 / sqrt(var + eps). The primitive
// writes the variance into the rstd buffer, converted in place ([rows] work, no copy).
void OneDnnKernels::layer_norm_forward(const float* x, const float* gamma, const float* beta,
                                       float* y, float* mean, float* rstd, int64_t rows,
                                       int64_t cols, float eps) const {
  if (rows == 0 || cols == 0) return;
  if (fast::avx512_enabled())
    return fast::layer_norm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  const auto flags = norm_flags(gamma != nullptr, beta != nullptr);
  Entry& e = onednn::cached(
      make_key(Op::layer_norm_fwd, static_cast<uint32_t>(flags), {rows, cols}, eps), [&](Entry& f) {
        const memory::desc md = f32_desc({rows, cols});
        const memory::desc stat = f32_desc({rows});
        const memory::desc param = f32_desc({cols});
        const dnnl::layer_normalization_forward::primitive_desc pd(
            dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, md, stat,
                                                    eps, flags),
            onednn::base_attr(), onednn::engine());
        Entry::Arg args[Entry::kMaxArgs] = {{DNNL_ARG_SRC, md},
                                            {DNNL_ARG_DST, md},
                                            {DNNL_ARG_MEAN, stat},
                                            {DNNL_ARG_VARIANCE, stat}};
        int n = 4;
        if (gamma) args[n++] = {DNNL_ARG_SCALE, param};
        if (beta) args[n++] = {DNNL_ARG_SHIFT, param};
        f.init(pd, std::span<const Entry::Arg>(args, n));
      });
  std::array<const void*, Entry::kMaxArgs> data{x, y, mean, rstd};
  size_t n = 4;
  if (gamma) data[n++] = gamma;
  if (beta) data[n++] = beta;
  e.execute({data.data(), n});
  for (int64_t r = 0; r < rows; ++r) rstd[r] = 1.0f / std::sqrt(rstd[r] + eps);
}

// The backward primitive wants the variance: with epsilon 0 in its descriptor, var = 1/rstd^2
// gives back 1/sqrt(var + 0) = rstd. With gamma or a wanted parameter gradient the primitive
// runs as a full backward with scale and shift (oneDNN 2.6 creates no backward_data with a
// scale, and rejects a shift-only backward at execution): a missing gamma is fed as ones, the
// unused shift as zeros, and an unwanted diff goes to a side buffer.
void OneDnnKernels::layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                        const float* rstd, const float* dy, float* dx,
                                        float* dgamma, float* dbeta, int64_t rows,
                                        int64_t cols) const {
  if (fast::avx512_enabled())
    return fast::layer_norm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols);
  if (cols == 0) return;
  if (rows == 0) {
    if (dgamma) std::fill_n(dgamma, cols, 0.0f);
    if (dbeta) std::fill_n(dbeta, cols, 0.0f);
    return;
  }
  // oneDNN 2.6 accepts backward_data only without scale and shift.
  const bool diff_params = gamma || dgamma || dbeta;
  const bool use_scale = diff_params;
  const auto flags = norm_flags(use_scale, diff_params);
  const uint32_t key_flags = static_cast<uint32_t>(flags) | (diff_params ? 1u << 16 : 0u);
  Entry& e = onednn::cached(make_key(Op::layer_norm_bwd, key_flags, {rows, cols}), [&](Entry& f) {
    const memory::desc md = f32_desc({rows, cols});
    const memory::desc stat = f32_desc({rows});
    const memory::desc param = f32_desc({cols});
    const dnnl::layer_normalization_forward::primitive_desc hint(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, md, stat, 0.0f,
                                                flags),
        onednn::engine());
    const auto prop = diff_params ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
    const dnnl::layer_normalization_backward::primitive_desc pd(
        dnnl::layer_normalization_backward::desc(prop, md, md, stat, 0.0f, flags),
        onednn::base_attr(), onednn::engine(), hint);
    Entry::Arg args[Entry::kMaxArgs] = {{DNNL_ARG_SRC, md},
                                        {DNNL_ARG_MEAN, stat},
                                        {DNNL_ARG_VARIANCE, stat},
                                        {DNNL_ARG_DIFF_DST, md},
                                        {DNNL_ARG_DIFF_SRC, md}};
    int n = 5;
    if (use_scale) args[n++] = {DNNL_ARG_SCALE, param};
    if (diff_params) {
      args[n++] = {DNNL_ARG_SHIFT, param};  // required by the primitive, unused by the math
      args[n++] = {DNNL_ARG_DIFF_SCALE, param};
      args[n++] = {DNNL_ARG_DIFF_SHIFT, param};
    }
    f.init(pd, std::span<const Entry::Arg>(args, n));
    // [rows] variance, [cols] ones, [cols] zeros (shift), [cols] + [cols] unwanted diff
    // scale and shift.
    f.buffer.assign(static_cast<size_t>(rows + 4 * cols), 0.0f);
    std::fill_n(f.buffer.data() + rows, cols, 1.0f);
  });
  onednn::EntryLock lock(e);
  float* var = e.buffer.data();
  for (int64_t r = 0; r < rows; ++r) var[r] = 1.0f / (rstd[r] * rstd[r]);
  float* side = var + rows;
  std::array<const void*, Entry::kMaxArgs> data{x, mean, var, dy, dx};
  size_t n = 5;
  if (use_scale) data[n++] = gamma ? gamma : side;
  if (diff_params) {
    data[n++] = side + cols;
    data[n++] = dgamma ? dgamma : side + 2 * cols;
    data[n++] = dbeta ? dbeta : side + 3 * cols;
  }
  lock.execute({data.data(), n});
}

void OneDnnKernels::relu_forward(const float* x, float* y, int64_t n) const {
  eltwise(Op::eltwise_fwd, dnnl::algorithm::eltwise_relu, n, {x, y});
}

void OneDnnKernels::relu_backward(const float* x, const float* dy, float* dx, int64_t n) const {
  eltwise(Op::eltwise_bwd, dnnl::algorithm::eltwise_relu, n, {x, dy, dx});
}

void OneDnnKernels::gelu_forward(const float* x, float* y, int64_t n) const {
  eltwise(Op::eltwise_fwd, dnnl::algorithm::eltwise_gelu_erf, n, {x, y});
}

void OneDnnKernels::gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const {
  eltwise(Op::eltwise_bwd, dnnl::algorithm::eltwise_gelu_erf, n, {x, dy, dx});
}

}  // namespace headlab
