#ifndef VQSERVE_TESTS_UTIL_DECODE_REFERENCE_H_
#define VQSERVE_TESTS_UTIL_DECODE_REFERENCE_H_

// float64 decode-then-attend reference of a DecodeCase: every coded token is decoded from
// its page exactly as docs/kv_formats.md describes, the ring tokens are read as fp16, then
// plain softmax attention. independent of the gpu kernels' lookup-table math.

#include <vector>

#include "tests/util/decode_case.h"

namespace vqserve::testing {

// out: (batch, num_heads, head_dim).
std::vector<double> ReferenceDecodeAttention(const DecodeCase& c);

// ||a - b|| / ||b||.
double RelativeError(const std::vector<float>& a, const std::vector<double>& b);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_DECODE_REFERENCE_H_
