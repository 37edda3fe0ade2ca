// vecinfer decode attention, head_dim 128, 1-bit keys (sub-vectors of 8), 1-bit values (sub-vectors of 8).
#include "kernels/cuda/vecinfer_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchVecInferDecode<128, 8, 8, 1>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<128, 8, 8, 2>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<128, 8, 8, 4>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<128, 8, 8, 8>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
}  // namespace vqserve::cuda
