// Embedding layer: rows of the weight gathered by id (the fused embedding op).
#include "nn/embedding.h"

#include "autograd/ops.h"
#include "nn/init.h"

namespace loom::nn {

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num), embedding_dim(dim) {
  LOOM_CHECK(num > 0 && dim > 0,
             "Embedding: num_embeddings {} and embedding_dim {} must be positive", num, dim);
  weight = register_parameter("weight", Tensor::empty({num, dim}));
  reset_parameters();
}

void Embedding::reset_parameters() { init::normal_(weight, 0.0, 1.0); }

Tensor Embedding::forward(const Tensor& ids) const {
  // ids int64 [...] -> [..., embedding_dim]
  LOOM_CHECK(ids.defined() && ids.dtype() == DType::Int64,
             "Embedding({}, {}): expected int64 ids, got {}", num_embeddings, embedding_dim,
             ids.defined() ? dtype_name(ids.dtype()) : "undefined");
  return embedding(weight, ids);
}

std::string Embedding::extra_repr() const {
  return fmt::format("{}, {}", num_embeddings, embedding_dim);
}

}  // namespace loom::nn
