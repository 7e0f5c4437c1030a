#pragma once
// Packed parameters: the storage invariant behind one GEMM for several Linear projections (the
// fused Q, K, V projection of MultiHeadAttention, through linear_cat).
//
// w_q, w_k and w_v stay separate parameters (their own names in named_parameters, state_dict,
// checkpoints and optimizer state), yet linear_cat runs x [.., in] -> [.., sum out_i] as one
// GEMM. It does so without copies only while two things hold:
//
//   values     the parts' values are consecutive row blocks of one storage, in order (part
//              i + 1 starts where part i ends), so the stacked [sum out_i, in] weight (and
//              [sum out_i] bias) is read in place. pack_values() establishes it; MultiHeadAttention
//              calls it at construction and ensure_values_packed() before each fast forward.
//   gradients  the parts' gradients are views of consecutive row blocks of one buffer, so the
//              weight gradient g^T x [sum out_i, in] is one GEMM straight into them.
//              grad_target() establishes it on linear_cat's first backward and keeps it.
//
// What breaks it, and what then happens (tests/layers/test_packed_params.cpp checks each):
//   - reassigning a value (mha.w_q->weight.value() = t): linear_cat alone would gather the parts
//     into a temporary on every call and run one weight-gradient GEMM per part. The next
//     MultiHeadAttention forward re-packs instead (t's values are copied into a new buffer; the
//     parameter no longer aliases t), so the fusion keeps working.
//   - reassigning or clearing some parts' gradients (w.grad() = t, clear_grad()): the next
//     backward re-packs them (their values copied, cleared ones zero) and accumulates as before.
//   - load_state_dict, optimizer updates, zero_grad and gradient clipping write in place: the
//     packing holds. Optimizer state (moments) lives in tensors of its own: not involved.
//   - a part that needs no gradient (frozen): each wanted part gets its own GEMM; values stay
//     packed.

#include <span>

#include "autograd/grad.h"
#include "autograd/var.h"

namespace headlab::packed {

// Whether the parts' values (gradients) are defined consecutive row blocks of one storage.
bool values_packed(std::span<const Var> parts);
bool grads_packed(std::span<const Var> parts);

// Moves the parts' values ([rows_i, ..] with equal trailing dims) into consecutive row blocks of
// one new buffer, values unchanged. The Vars stay the same objects.
void pack_values(std::span<const Var> parts);
// pack_values() unless values_packed(); returns whether it had to pack.
bool ensure_values_packed(std::span<const Var> parts);

// The parts' stacked gradient [sum rows_i, ..] as one target, for a contribution computed in one
// go, when every part wants a gradient and their values are packed (or their gradients already
// are): the first time it allocates one buffer and makes each part's gradient a view of its row
// block (fresh: write); after that it returns that buffer (accumulate), re-packing gradients
// that were reassigned or cleared. A null target otherwise: the caller then adds part by part.
grad::Target grad_target(std::span<const Var> parts);

}  // namespace headlab::packed
