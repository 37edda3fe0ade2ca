// kivi decode attention (2 or 4 bits, read from packed codes), head_dim 128.
#include "kernels/cuda/decode/paged_dense_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchPagedDenseDecode<128, 1, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<128, 2, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<128, 4, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<128, 8, true>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
