// fp16 paged baseline decode attention, head_dim 64.
#include "kernels/cuda/paged_dense_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchPagedDenseDecode<64, 1, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<64, 2, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<64, 4, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<64, 8, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
