#ifndef VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_WARP_DECODE_H_
#define VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_WARP_DECODE_H_

// commvq decode attention with the key books in shared memory as fp16 (every round in one
// block, or half the rounds in each block of a pair) and every warp streaming its own pages
// (commvq_warp_decode.cu); the commvq default of LaunchDecodeAttention. the cluster kernel of
// commvq_decode.cuh serves other round counts.

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/decode/decode_attention.h"

namespace vqserve::cuda {

// query heads one block of the warp kernel serves at most.
inline constexpr int kCommVqWarpMaxHeads = 4;

// whether LaunchDecodeAttention runs the warp kernel: an instantiated shape: head_dim 64 with 5 or 11 key rounds, head_dim 128 with 11 (one block) or 12 .. 22 and
// <= 2 value rounds (a cluster of 2 blocks, 11 key rounds and one value round each), i.e.
// commvq-1 / commvq-2 as CommVqOptionsForName derives them.
bool UsesCommVqWarp(const DecodeAttentionParams& p);

// blocks of the warp kernel per (split, head group): 1, or 2 (a cluster) for head_dim 128 with
// more than 11 key rounds.
int CommVqWarpBlocks(const DecodeAttentionParams& p);

// writes the split partials (blocks x < num_splits: pages; x == num_splits: residual ring and
// sink) of hb (<= kCommVqWarpMaxHeads) query heads per block; the caller runs the split
// combine. empty string on success.
std::string LaunchCommVqWarpDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_WARP_DECODE_H_
