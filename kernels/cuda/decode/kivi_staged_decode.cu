// run-time choice of the staged kivi kernel: which params it serves, and (head_dim, bits) as
// template constants.
#include "kernels/cuda/decode/kivi_staged_decode.h"

#include <cstdint>
#include <string>

namespace vqserve::cuda {

bool UsesKiviStaged(const DecodeAttentionParams& p) {
  const uintptr_t slice = reinterpret_cast<uintptr_t>(p.pages) + static_cast<uintptr_t>(p.layer_offset);
  return p.page_tokens == 32 && (p.head_dim == 64 || p.head_dim == 128) &&
         (p.kivi_bits == 2 || p.kivi_bits == 4) && slice % 16 == 0 && p.page_stride % 16 == 0;
}

std::string LaunchKiviStagedDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream) {
  if (!UsesKiviStaged(p)) return "kivi staged decode: unsupported params";
  if (hb < 1 || hb > 8) return "kivi staged decode: 1 .. 8 query heads per block";
  if (p.head_dim == 64) {
    return p.kivi_bits == 2 ? LaunchKiviStagedFor<64, 2>(p, hb, num_splits, stream)
                            : LaunchKiviStagedFor<64, 4>(p, hb, num_splits, stream);
  }
  return p.kivi_bits == 2 ? LaunchKiviStagedFor<128, 2>(p, hb, num_splits, stream)
                          : LaunchKiviStagedFor<128, 4>(p, hb, num_splits, stream);
}

}  // namespace vqserve::cuda
