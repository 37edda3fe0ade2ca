#ifndef VQSERVE_TESTS_UTIL_CODEC_CHECK_H_
#define VQSERVE_TESTS_UTIL_CODEC_CHECK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/calibration/calibration_data.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve::testing {

// synthetic keys/values (tokens, kv_heads, head_dim) with a few outlier channels in the keys,
// as real post-rope keys have. deterministic for `seed`.
void SyntheticKv(const KvShape& shape, int tokens, uint64_t seed, std::vector<float>* k,
                 std::vector<float>* v);
// calibration data of `tokens` synthetic tokens per layer (post-rope keys and values).
CalibrationData SyntheticCalibration(const KvShape& shape, int tokens, uint64_t seed);

// float64 causal-free attention of one query position over n tokens.
// q: (num_heads, D); k, v: (n, kv_heads, D); returns (num_heads, D).
std::vector<double> ReferenceAttention(const KvShape& shape, const float* q, const float* k,
                                       const float* v, int n);

// attention of q over coded pages through codec.AttendPages + FinishSoftmax, and the float64
// attention over the same pages decoded with DecodePage. returns max relative error (l2, per
// head) between the two. k, v: (n, kv_heads, D) raw inputs encoded page by page.
double CodesVsDequantized(const KvCodec& codec, int layer, const float* k, const float* v, int n,
                          const float* q);

// relative l2 error between a and b (per head max). a, b: (num_heads, D).
double MaxHeadRelError(const KvShape& shape, const std::vector<double>& a, const float* b);

// float -> fp16 -> float.
float RoundHalf(float x);

struct PagedCheck {
  double vs_dequantized = 0;  // paged attention vs float64 attention on decoded pages + fp16 ring
  double vs_exact = 0;        // paged attention vs float64 attention on the raw fp32 inputs
};
// feeds n tokens of synthetic k/v (chunks of `chunk`) through a PagedKvCache of the codec for
// `layer` 0..num_layers-1, then checks the queries of the last chunk on every layer.
PagedCheck CheckPagedDecode(std::unique_ptr<KvCodec> codec, int n, int chunk, uint64_t seed);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_CODEC_CHECK_H_
