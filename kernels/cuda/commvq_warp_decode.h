#ifndef VQSERVE_KERNELS_CUDA_COMMVQ_WARP_DECODE_H_
#define VQSERVE_KERNELS_CUDA_COMMVQ_WARP_DECODE_H_

// commvq decode attention with the whole head's key books in shared memory as fp16 and every
// warp streaming its own pages (commvq_warp_decode.cu); the commvq default of
// LaunchDecodeAttention where its books fit. the cluster kernel of commvq_decode.cuh serves the
// rest (commvq-2 at head_dim 128) and commvq_version 1.

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/decode_attention.h"

namespace vqserve::cuda {

// query heads one block of the warp kernel serves at most.
inline constexpr int kCommVqWarpMaxHeads = 4;

// whether LaunchDecodeAttention runs the warp kernel: commvq_version 0, head_dim 128 with 11
// key rounds or head_dim 64 with 5 or 11 (commvq-1 / commvq-2 as CommVqOptionsForName derives
// them, the instantiated ones), and books + page stages that fit in shared memory.
bool UsesCommVqWarp(const DecodeAttentionParams& p);

// writes the split partials (blocks x < num_splits: pages; x == num_splits: residual ring and
// sink) of hb (<= kCommVqWarpMaxHeads) query heads per block; the caller runs the split
// combine. empty string on success.
std::string LaunchCommVqWarpDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMVQ_WARP_DECODE_H_
