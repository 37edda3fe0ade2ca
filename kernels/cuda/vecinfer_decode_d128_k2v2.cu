// vecinfer decode attention, head_dim 128, 2-bit keys (sub-vectors of 4), 2-bit values (sub-vectors of 4).
#include "kernels/cuda/vecinfer_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchVecInferDecode<128, 4, 4, 1>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<128, 4, 4, 2>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<128, 4, 4, 4>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
}  // namespace vqserve::cuda
