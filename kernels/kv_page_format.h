#ifndef VQSERVE_KERNELS_KV_PAGE_FORMAT_H_
#define VQSERVE_KERNELS_KV_PAGE_FORMAT_H_

// the page formats of docs/kv_formats.md: the one enum the kernels, the caches and the tests
// share (plain c++, no cuda).

namespace vqserve {

enum class KvPageFormat {
  kFp16,      // "fp16": K[H][P][D] fp16, V[H][P][D] fp16
  kKivi,      // "kivi-kBvB": per-channel keys / per-token values, B bits
  kVecInfer,  // "vecinfer-kXvY": 8-bit codes (4, 2, 1 bits per element) or 12-bit (3, 1.5)
  kCommVq,    // "commvq-R": 12-bit rope-commutative key codes, 8-bit residual value codes
};

}  // namespace vqserve

#endif  // VQSERVE_KERNELS_KV_PAGE_FORMAT_H_
