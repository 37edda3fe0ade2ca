#ifndef VQSERVE_KERNELS_CUDA_DECODE_FP16_STAGED_DECODE_H_
#define VQSERVE_KERNELS_CUDA_DECODE_FP16_STAGED_DECODE_H_

// decode attention over fp16 pages (docs/kv_formats.md "fp16") on the tensor cores, each warp
// staging half pages in shared memory with asynchronous copies; the fp16 baseline of
// LaunchDecodeAttention.

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/decode/decode_attention.h"

namespace vqserve::cuda {

// the most query heads one block serves (a kv head with more takes several blocks).
inline constexpr int kFp16StagedMaxHeads = 8;

// blocks of the staged fp16 kernel one sm holds (its 3 stages of 8 warps fill 192 KB of
// shared memory at head_dim 128, 96 KB at 64).
inline constexpr int Fp16StagedBlocksPerSm(int head_dim) { return head_dim == 64 ? 2 : 1; }

// writes the split partials (slots 0 .. num_splits - 1: pages; slot num_splits: the residual
// ring, folded by the last split's blocks) of `hb` (<= kFp16StagedMaxHeads) query heads per
// block; head_dim 64 or 128, 32-token pages.
// the caller runs the split combine. empty string on success.
std::string LaunchFp16StagedDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_FP16_STAGED_DECODE_H_
