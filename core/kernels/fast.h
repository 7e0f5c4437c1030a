#pragma once
// Vectorized loops behind the fused kernels of the blas and onednn backends (internal to core;
// use kernels()). Each function has an AVX-512 build and a portable build of the same source;
// the AVX-512 one runs where the CPU has it (checked once). Row-major fp32, no allocation
// beyond pooled scratch, sizes of zero do nothing. Semantics as the Kernels methods of the same
// name (core/kernels/kernels.h).

#include <cstdint>

#include "core/kernels/kernels.h"

namespace headlab::fast {

// c [rows, cols] += bias (per column; null: none), then max(0, .) when relu.
void bias_act(float* c, int64_t rows, int64_t cols, const float* bias, bool relu);
void bias_act_backward(const float* dy, const float* y, float* dz, float* db, int64_t rows,
                       int64_t cols);
void add_layer_norm_forward(const float* x, const float* r, const float* gamma, const float* beta,
                            float* y, float* xhat, float* rstd, int64_t rows, int64_t cols,
                            float eps);
void add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                             const float* dy, float* dx, bool accumulate_dx, float* dr,
                             bool accumulate_dr, float* dgamma, float* dbeta, int64_t rows,
                             int64_t cols);

void attention_forward(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,
                       float* out);
void attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                        const float* p_drop, const float* dout, float* dqkv, bool accumulate);

// True when the AVX-512 builds run.
bool avx512_enabled();

// Threads for a kernel over `work` floats: OpenMP's count when there is enough work to share,
// else 1 (a parallel region costs microseconds).
int threads_for(int64_t work);

}  // namespace headlab::fast

// The build attribute and inlining for the two builds of each kernel body.
#if defined(__clang__)  // the fuzz build: clang's target attribute has no prefer-vector-width,
                        // and takes no [[...]] attribute after __attribute__
#define HEADLAB_AVX512_TARGET __attribute__((target("arch=x86-64-v4")))
#define HEADLAB_INLINE __attribute__((always_inline)) inline
#else
#define HEADLAB_AVX512_TARGET __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#define HEADLAB_INLINE [[gnu::always_inline]] inline
#endif
