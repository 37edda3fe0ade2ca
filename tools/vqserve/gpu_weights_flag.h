#ifndef VQSERVE_TOOLS_VQSERVE_GPU_WEIGHTS_FLAG_H_
#define VQSERVE_TOOLS_VQSERVE_GPU_WEIGHTS_FLAG_H_

// `--gpu-weights fp16|blocks` of serve and generate: how a GGUF's quantized tensors live on the
// gpu (runtime/cuda/cuda_backend.h CudaWeights). blocks (the default with --device cuda): kept
// in their q4_0/q4_1/q8_0/q4_k/q5_k/q6_k blocks (3.5x less memory on an 8B Q4_K_M, faster at
// batch 1 and 16 on the 8B and the default model: docs/performance.md); fp16: dequantized at
// load (cuBLAS).

#include <string>

#include "runtime/cuda/cuda_backend.h"

namespace vqserve::cli {

// "" when `device` and `value` go together (`*out` set), else the one-line problem. an empty
// value (the flag not given) is blocks on cuda (fp16 elsewhere, where it means nothing).
inline std::string ParseGpuWeights(const std::string& value, const std::string& device,
                                   CudaWeights* out) {
  if (value.empty()) {
    *out = device == "cuda" ? CudaWeights::kBlocks : CudaWeights::kFp16;
    return "";
  }
  if (value != "fp16" && value != "blocks") {
    return "--gpu-weights must be fp16 or blocks (got '" + value + "')";
  }
  if (value == "blocks" && device != "cuda") return "--gpu-weights blocks needs --device cuda";
  *out = value == "blocks" ? CudaWeights::kBlocks : CudaWeights::kFp16;
  return "";
}

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_GPU_WEIGHTS_FLAG_H_
