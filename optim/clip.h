#pragma once
// Gradient clipping by global norm (Pascanu et al., 2013; PyTorch's clip_grad_norm_ with the
// 2-norm).

#include "layers/module.h"

namespace headlab {

// The 2-norm of all gradients together, sqrt(sum over parameters and elements of g^2),
// accumulated in double. Parameters without a gradient count as zero.
double grad_norm(const NamedParameters& params);

// Computes norm = grad_norm(params) and returns it (the norm before clipping, for logging).
// If norm > max_norm, every gradient is scaled by max_norm / (norm + 1e-6) (PyTorch's factor);
// at or below max_norm nothing changes. max_norm <= 0 turns clipping off (the norm is still
// returned). A non-finite norm (NaN or Inf in some gradient) is returned without touching any
// gradient: the caller must check std::isfinite and stop rather than step.
// Throws headlab::Error if max_norm is NaN.
double clip_grad_norm(const NamedParameters& params, double max_norm);

}  // namespace headlab
