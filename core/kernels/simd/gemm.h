#pragma once
// headlab's own matrix product for CPUs with AVX-512 (internal to core; OneDnnKernels' matmul and
// gemm_bias_act run it there): C = alpha op(A) op(B) + beta C over a GemmDesc, with an epilogue
// for the forward of a linear layer (bias per column, then ReLU).
//
// Register blocks of 12 rows by 32 columns of C (24 accumulators) over op(A) and op(B) packed
// into panels ([12] and [32] wide, k long, zero past the edges); the sum over k of each C element
// runs whole in one accumulator, in order, one FMA per term, and is never split, so
//   - the result does not depend on the thread count (threads take whole blocks of rows);
//   - beta = 1 gives exactly C + (the beta = 0 result): alpha acc is rounded, then added to C
//     (gradient accumulation over micro-batches equals the sum of separately computed terms);
//   - a call allocates nothing once the pool holds its pack buffers.
// Row blocks of A are sized to stay in L2 while the panels of B stream past them.

#include "core/kernels/kernels.h"

namespace headlab::fast {

// Whether gemm() can run here (the CPU has AVX-512).
bool own_gemm_available();

// The product of d (any batch, strides, alpha, beta; k == 0 scales C by beta). With bias
// (null: none) or relu, d must be a single product with alpha 1 and beta 0; bias [n] is added
// to every row, then max(0, .) when relu.
void gemm(const GemmDesc& d, const float* a, const float* b, float* c, const float* bias = nullptr,
          bool relu = false);

// What the bf16 product may do to its A operand as it packs it (the linear layer's backward,
// Kernels::linear_backward, with its ReLU mask and bias gradient): with mask (A's layout, lda
// apart; null: none), A's values are taken where the mask is positive and 0 elsewhere; with
// row_sums (null: none; d.trans_a and batch 1 only), row_sums[r] = sum over k of op(A)(r, .) as
// masked, in fp32 and in order (before rounding; written, not added).
struct Bf16A {
  const float* mask = nullptr;
  float* row_sums = nullptr;
};

// The product of d in bf16 (Precision::bf16; gemm_bf16.cpp): both operands rounded to bf16
// (round to nearest even) and multiplied on the AVX512_BF16 dot-product instruction with fp32
// accumulation, then alpha, beta, bias and ReLU in fp32 as gemm(). The sum over k of each C
// element is one accumulator in a fixed order, so, as gemm(), the bits do not depend on the thread
// count and beta = 1 adds exactly the beta = 0 result. Needs bf16_supported().
void gemm_bf16(const GemmDesc& d, const float* a, const float* b, float* c,
               const float* bias = nullptr, bool relu = false, const Bf16A& a_options = {});

}  // namespace headlab::fast
