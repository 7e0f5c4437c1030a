#pragma once
// Embedding: a table of num_embeddings vectors of size embedding_dim, "weight"
// [num_embeddings, embedding_dim], initialised N(0, init_std) (PyTorch: std 1.0).
//   forward(ids, ids_shape) -> [ids_shape.., embedding_dim]
// Throws headlab::Error when an id lies outside [0, num_embeddings) or ids.size() differs from
// ids_shape.numel().

#include <cstdint>
#include <span>

#include "autograd/var.h"
#include "core/rng.h"
#include "layers/module.h"

namespace headlab {

struct EmbeddingOptions {
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
  float init_std = 1.0f;
};

class Embedding : public Module {
 public:
  Embedding(const EmbeddingOptions& options, Rng& rng);
  Var forward(std::span<const int32_t> ids, const Shape& ids_shape);
  static int64_t parameter_count(const EmbeddingOptions& o) {
    return o.num_embeddings * o.embedding_dim;
  }

  const EmbeddingOptions& options() const { return options_; }
  Var weight;

 private:
  EmbeddingOptions options_;
};

}  // namespace headlab
