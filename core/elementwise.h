#pragma once
// Plain element-wise, reduction and indexing loops shared by the autograd ops. Raw row-major
// fp32 pointers, no allocation, no autograd. Sizes of zero are allowed and do nothing. Sums
// accumulate in double. "Suffix broadcast": b holds nb elements, nb divides n, and element i of
// a pairs with element i % nb of b (a bias row [D] over [B, T, D]).

#include <cstdint>

#include "core/rng.h"
#include "core/sample_rng.h"
#include "core/shape.h"

namespace headlab::ew {

// out[i] = alpha * x[i]. out may alias x.
void scale(const float* x, int64_t n, float alpha, float* out);
// y[i] += alpha * x[i].
void axpy(const float* x, int64_t n, float alpha, float* y);
// out[i] = a[i] + alpha * b[i % nb] (suffix broadcast). out may alias a.
void add_broadcast(const float* a, int64_t n, const float* b, int64_t nb, float alpha, float* out);
// out[i] = a[i] * b[i % nb] (suffix broadcast). out may alias a.
void mul_broadcast(const float* a, int64_t n, const float* b, int64_t nb, float* out);
// Column sums of x [rows, cols]: out[j] = alpha * sum_r x[r, j].
void sum_rows(const float* x, int64_t rows, int64_t cols, float alpha, float* out);
// Column sums of a product: out[j] = sum_r a[r, j] * b[r, j] (a, b [rows, cols]).
void sum_rows_product(const float* a, const float* b, int64_t rows, int64_t cols, float* out);
// sum_i x[i] in double.
double sum(const float* x, int64_t n);
// out[r] = the index of row r's largest value in x [rows, cols], the first of equal ones: what
// std::max_element picks, NaN included (skipped, unless it comes first). cols >= 1.
void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out);
namespace detail {
// argmax_rows' loop for CPUs without AVX-512 (where it has its own), for the tests.
void argmax_rows_portable(const float* x, int64_t rows, int64_t cols, int32_t* out);
}  // namespace detail

// Swaps the middle dims of [n0, n1, n2, n3]: out[i, k, j, l] = x[i, j, k, l], out is
// [n0, n2, n1, n3]. With n3 = 1 it transposes the last two dims of [n0, n1, n2]; with
// [B, T, h, d] it splits heads, with [B, h, T, d] it merges them. out must not alias x.
void swap_middle_dims(const float* x, int64_t n0, int64_t n1, int64_t n2, int64_t n3, float* out);

// out[i, :] = table[ids[i], :] for n ids, rows of width dim. Ids are not checked.
void gather_rows(const float* table, int64_t dim, const int32_t* ids, int64_t n, float* out);
// Integer ids kept in a pooled fp32 buffer (so saving them for backward allocates nothing):
// store_ids copies the int32 bit patterns unchanged into n floats; load_id reads one back. The
// floats are never used as numbers.
void store_ids(const int32_t* ids, int64_t n, float* bits);
int32_t load_id(const float* bits, int64_t i);
// table[id_i, :] += src[i, :] for the n ids stored by store_ids (repeated ids add up).
void scatter_add_rows(const float* src, int64_t dim, const float* id_bits, int64_t n, float* table);

// out = x where mask == 0, value where mask != 0. mask has x's rank; each of its dims equals
// x's or is 1 (broadcast), which the caller has checked. out may alias x.
void masked_fill(const float* x, const Shape& x_shape, const float* mask, const Shape& mask_shape,
                 float value, float* out);

// out = a where mask != 0, b where mask == 0; a, b and out of `shape`, mask as in masked_fill.
void select(const float* mask, const Shape& mask_shape, const float* a, const float* b,
            const Shape& shape, float* out);

// Inverted-dropout mask: mask[i] = 0 when rng.uniform() < p, else 1 / (1 - p). One draw per
// element, in order, so a seed gives the same mask on every backend. p in [0, 1).
void dropout_mask(Rng& rng, float p, float* mask, int64_t n);
// The same for a mask of `rows` samples (n / rows elements each) keyed by sample: takes one
// site of rng, and row r's elements draw in order from rng.row(site, r) (core/sample_rng.h).
// rows >= 1 divides n.
void dropout_mask(SampleRng& rng, float p, float* mask, int64_t rows, int64_t n);

}  // namespace headlab::ew
