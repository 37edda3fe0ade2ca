// kivi decode attention (2 or 4 bits, read from packed codes), head_dim 64.
#include "kernels/cuda/decode/paged_dense_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchPagedDenseDecode<64, 1, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<64, 2, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<64, 4, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<64, 8, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
