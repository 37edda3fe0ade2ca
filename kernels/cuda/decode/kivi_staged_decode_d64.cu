// staged kivi decode attention (kivi_staged_decode.cuh), head_dim 64, 2 and 4 bits.
#include "kernels/cuda/decode/kivi_staged_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchKiviStagedFor<64, 2>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchKiviStagedFor<64, 4>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
