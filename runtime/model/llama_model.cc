#include "runtime/model/llama_model.h"

namespace vqserve {

KvShape LlamaModel::kv_shape() const {
  const ModelConfig& c = config();
  return KvShape{c.num_layers, c.num_kv_heads, c.num_heads, c.head_dim};
}

}  // namespace vqserve
