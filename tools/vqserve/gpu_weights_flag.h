#ifndef VQSERVE_TOOLS_VQSERVE_GPU_WEIGHTS_FLAG_H_
#define VQSERVE_TOOLS_VQSERVE_GPU_WEIGHTS_FLAG_H_

// `--gpu-weights fp16|blocks` of serve and generate: how a GGUF's quantized tensors live on the
// gpu (runtime/cuda/cuda_backend.h CudaWeights). fp16: dequantized at load (cuBLAS, the
// default); blocks: kept in their q4_0/q4_1/q8_0/q4_k/q5_k/q6_k blocks (3.5x less memory on an
// 8B Q4_K_M; faster at batch 1, slower at batch 16: docs/performance.md).

#include <string>

#include "runtime/cuda/cuda_backend.h"

namespace vqserve::cli {

// "" when `device` and `value` go together (`*out` set), else the one-line problem.
inline std::string ParseGpuWeights(const std::string& value, const std::string& device,
                                   CudaWeights* out) {
  if (value != "fp16" && value != "blocks") {
    return "--gpu-weights must be fp16 or blocks (got '" + value + "')";
  }
  if (value == "blocks" && device != "cuda") return "--gpu-weights blocks needs --device cuda";
  *out = value == "blocks" ? CudaWeights::kBlocks : CudaWeights::kFp16;
  return "";
}

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_GPU_WEIGHTS_FLAG_H_
