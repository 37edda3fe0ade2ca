#ifndef VQSERVE_BENCH_CUDA_BENCH_MODELS_H_
#define VQSERVE_BENCH_CUDA_BENCH_MODELS_H_

// the model shapes and kv caches of the cuda runtime's end-to-end benchmarks
// (cuda_e2e_decode_bench, cuda_e2e_prefill_bench) (built with the cuda backend only).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "runtime/kv/commvq_codec.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_random_kv.h"
#include "runtime/model/model_config.h"
#include "runtime/kv/vecinfer_codec.h"

namespace vqserve {

// "llama8b": Llama-3.1-8B's shape; else SmolLM2-135M(-Instruct)'s, the default model.
inline ModelConfig ShapeFor(const std::string& name) {
  ModelConfig c;
  c.architecture = "llama";
  c.name = name;
  if (name == "llama8b") {  // Llama-3.1-8B
    c.num_layers = 32, c.hidden_size = 4096, c.ffn_size = 14336, c.num_heads = 32;
    c.num_kv_heads = 8, c.head_dim = 128, c.vocab_size = 128256, c.rope_theta = 500000.0f;
  } else {  // SmolLM2-135M(-Instruct), the default model
    c.num_layers = 30, c.hidden_size = 576, c.ffn_size = 1536, c.num_heads = 9;
    c.num_kv_heads = 3, c.head_dim = 64, c.vocab_size = 49152, c.rope_theta = 100000.0f;
  }
  c.rope_dim = c.head_dim;
  c.context_length = 131072;
  return c;
}

// fp16 pages; kivi-kBvB; vecinfer-* and commvq-* over random codebooks (commvq's of the
// model's rope base). coded caches keep `sink` fp16 tokens.
inline absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCache(const std::string& codec,
                                                              const KvShape& shape,
                                                              float rope_theta, int pages,
                                                              int slots, int sink) {
  if (codec == "fp16") return MakeCudaKvCache(shape, pages, slots);
  if (absl::StartsWith(codec, "kivi-")) {
    return MakeCudaKvCacheForCodec(codec, shape, nullptr, pages, slots, sink);
  }
  if (absl::StartsWith(codec, "commvq-")) {
    absl::StatusOr<CommVqOptions> o = CommVqOptionsForName(codec, shape);
    if (!o.ok()) return o.status();
    return MakeCudaCommVqKvCache(std::make_shared<const CommVqCodebooks>(RandomCommVqCodebooks(
                                     shape, rope_theta, o->key_rounds, o->value_rounds, 11)),
                                 o->key_rounds, o->value_rounds, pages, slots, sink);
  }
  absl::StatusOr<VecInferOptions> o = VecInferOptionsForName(codec);
  if (!o.ok()) return o.status();
  return MakeCudaVecInferKvCache(
      std::make_shared<const VecInferCodebooks>(RandomVecInferCodebooks(shape, *o, 11)), pages,
      slots, sink);
}

}  // namespace vqserve

#endif  // VQSERVE_BENCH_CUDA_BENCH_MODELS_H_
