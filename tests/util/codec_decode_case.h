#ifndef VQSERVE_TESTS_UTIL_CODEC_DECODE_CASE_H_
#define VQSERVE_TESTS_UTIL_CODEC_DECODE_CASE_H_

// one decode query over pages a cpu codec wrote: the pages (its EncodePage), the fp16 residual
// ring, the codec's own attention as the reference, and the same inputs as a DecodeCase for the
// gpu kernels. plain c++.

#include <cstdint>
#include <vector>

#include "runtime/kv/kv_codec.h"
#include "tests/util/decode_case.h"

namespace vqserve::testing {

struct CodecDecodeCase {
  DecodeCase gpu;                // q_tilde = q and no codebooks: the caller sets its format's fields
  std::vector<float> reference;  // (num_heads, head_dim): codec.AttendPages + the fp16 ring
};

// n tokens of k, v (n, kv_heads, head_dim) of `layer` (of the codec's shape's layers): those the
// flush policy codes in pages (page j at pool page pages - 1 - j: a non-trivial block table), the
// rest in the ring (fp16); q (num_heads, head_dim) at position n - 1.
CodecDecodeCase MakeCodecDecodeCase(const KvCodec& codec, int layer, int n, const std::vector<float>& k,
                                    const std::vector<float>& v, const std::vector<float>& q);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_CODEC_DECODE_CASE_H_
