#ifndef VQSERVE_RUNTIME_CUDA_CUDA_LLAMA_MODEL_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_LLAMA_MODEL_H_

// the llama forward pass on a cuda device: the cpu LlamaModel's interface and results (within
// fp16 rounding), with weight matrices in device memory in their gguf block format or as fp16
// (CudaWeights, runtime/cuda/cuda_weight_matrix.h), fp32 accumulation and the kv cache in a
// CudaKvCache.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/model/llama_model.h"

namespace vqserve {

// a model of `config`'s shape with pseudo-random weights made on the device from `seed`
// (uniform, variance 1 / fan-in; norms 1; rope frequencies of rope_theta, no scaling), for
// benchmarks: speed does not depend on weight values. it has no tokenizer (tokenizer() aborts).
// kFp16: fp16 matrices, fp32 embeddings; kBlocks: random blocks of the types of a llama.cpp
// Q4_K_M file (q4_k; q6_k for the head and, in the layers llama.cpp gives more bits, attn_v
// and ffn_down).
absl::StatusOr<std::unique_ptr<LlamaModel>> MakeRandomCudaLlamaModel(
    const ModelConfig& config, uint64_t seed, CudaWeights weights = CudaWeights::kFp16);

// device bytes of a cuda model's weights (embeddings, head, blocks, norms; 0 for other models).
int64_t CudaWeightBytes(const LlamaModel& model);

// turns cuda graphs for decode steps on or off for a model of LoadCudaLlamaModel or
// MakeRandomCudaLlamaModel (default: on unless VQSERVE_CUDA_GRAPHS=0); results are the same
// either way. false when `model` is not a cuda model.
bool SetCudaGraphs(LlamaModel& model, bool on);

// multi-token steps of a cuda model on the tensor-core prefill kernels (on) or on the reference
// kernels, one warp per token and head (off); default on unless VQSERVE_CUDA_TILED_PREFILL=0.
// results agree to fp16 rounding. false when `model` is not a cuda model.
bool SetCudaTiledPrefill(LlamaModel& model, bool on);

// key splits of the tensor-core prefill kernel of a cuda model: 0 (default, unless
// VQSERVE_CUDA_PREFILL_SPLITS says otherwise) lets the launcher fill the gpu (prefill_tiles.h),
// 1..8 forces that many. results agree to fp32 rounding. false when `model` is not a cuda model.
bool SetCudaPrefillSplits(LlamaModel& model, int splits);

// decode steps of `model` replayed from a captured cuda graph so far (0 for other models).
int64_t CudaGraphReplays(const LlamaModel& model);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_LLAMA_MODEL_H_
