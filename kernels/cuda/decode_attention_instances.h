#ifndef VQSERVE_KERNELS_CUDA_DECODE_ATTENTION_INSTANCES_H_
#define VQSERVE_KERNELS_CUDA_DECODE_ATTENTION_INSTANCES_H_

// launchers of every instantiated decode kernel (defined in the *_decode_d*.cu files) and of
// the split combine; the dispatcher in decode_attention.cu picks one at run time.

#include <string>

#include "kernels/cuda/decode_attention.h"

namespace vqserve::cuda {

// fp16 (kKivi false) or kivi pages, HBP >= hb query heads per block.
template <int D, int HBP, bool kKivi>
std::string LaunchPagedDenseDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

// vecinfer pages with DK / DV dims per key / value sub-vector.
template <int D, int DK, int DV, int HBP>
std::string LaunchVecInferDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                 cudaStream_t stream);

// vecinfer pages, head_dim 128, 4-dim key and value sub-vectors, hb <= 4, on the tensor cores
// (vecinfer_mma_decode.cu).
std::string LaunchVecInferMmaDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                    cudaStream_t stream);

// the same shapes, v7: lut scores and values both on the tensor cores, code-independent
// shared-memory banks; the last split also folds the residual ring; p.vecinfer_version 5 runs
// the v7r variant (vecinfer_mma7_decode.cu).
std::string LaunchVecInferMma7Decode(const DecodeAttentionParams& p, int hb, int num_splits,
                                     cudaStream_t stream);

// the same shapes and head_dim 64, v8: v7's page loop with the per-launch costs cut (book
// build, residual ring); p.vecinfer_version 6, 7 with the quad value gathers (v8q, head_dim
// 128), 8 also with the lazy softmax max (v8z; vecinfer_v8_decode.cu).
std::string LaunchVecInferV8Decode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

// vecinfer pages of any code width (8 or 12 bits) and sub-vector sizes (2, 4, 8), read
// element-wise with centroids from global memory (vecinfer_generic_decode.cu).
std::string LaunchVecInferGenericDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                        cudaStream_t stream);

// commvq pages, HBP >= hb query heads per block (commvq_decode_d*.cu).
template <int D, int HBP>
std::string LaunchCommVqDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                               cudaStream_t stream);

// out (b, h, :) = merge of the num_splits + 1 workspace partials of (b, h).
std::string LaunchSplitCombine(const DecodeAttentionParams& p, int num_splits, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_ATTENTION_INSTANCES_H_
