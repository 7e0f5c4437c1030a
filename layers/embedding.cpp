#include "layers/embedding.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/init.h"

namespace headlab {

Embedding::Embedding(const EmbeddingOptions& options, Rng& rng) : options_(options) {
  if (options.num_embeddings <= 0 || options.embedding_dim <= 0)
    fail("embedding: num_embeddings ({}) and embedding_dim ({}) must be positive",
         options.num_embeddings, options.embedding_dim);
  if (!(options.init_std >= 0.0f))
    fail("embedding: init_std is {} but must be >= 0", options.init_std);
  weight = register_parameter("weight", init_normal({options.num_embeddings, options.embedding_dim},
                                                    options.init_std, rng));
}

Var Embedding::forward(std::span<const int32_t> ids, const Shape& ids_shape) {
  if (static_cast<int64_t>(ids.size()) != ids_shape.numel())
    fail("embedding: {} ids given for ids shape {} ({} expected)", ids.size(), ids_shape.str(),
         ids_shape.numel());
  // The op checks the id range.
  return embedding(weight, ids, ids_shape);
}

}  // namespace headlab
