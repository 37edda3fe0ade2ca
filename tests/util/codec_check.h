#ifndef VQSERVE_TESTS_UTIL_CODEC_CHECK_H_
#define VQSERVE_TESTS_UTIL_CODEC_CHECK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/calibration/calibration_data.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve::testing {

// synthetic keys/values (tokens, kv_heads, head_dim) with a few outlier channels in the keys,
// as real post-rope keys have. deterministic for `seed`.
void SyntheticKv(const KvShape& shape, int tokens, uint64_t seed, std::vector<float>* k,
                 std::vector<float>* v);
// calibration data of `tokens` synthetic tokens per layer (post-rope keys and values): layer l
// holds tokens [skip, skip + tokens) of SyntheticKv(shape, ..., seed + 100 l), the stream
// CheckPagedDecode(codec, n, chunk, seed) feeds layer l. with skip >= n a codebook is trained on
// tokens of the same distribution that the checked stream does not contain. q_moment holds a
// synthetic queries' second moment per kv head (0.5 I + u u^T).
CalibrationData SyntheticCalibration(const KvShape& shape, int tokens, uint64_t seed,
                                     int skip = 0);

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

// errors relative to the float64 attention on the raw fp32 inputs ("exact"). for scale: an
// all-zero output has error 1 in both measures.
struct PagedCheck {
  double vs_dequantized = 0;  // paged attention vs float64 attention on decoded pages + fp16 ring
  // paged attention vs float64 attention on pages the codec encodes and decodes itself, outside
  // the cache, from the fp16-rounded inputs at their positions (+ the fp16 tokens).
  double vs_standalone = 0;
  double vs_exact = 0;        // paged attention vs exact: max over queries, layers and heads
  // paged attention vs exact over every checked query, layer and head: sqrt(sum |o - exact|^2 /
  // sum |exact|^2) (the max above is set by the head whose output is smallest).
  double rms_vs_exact = 0;
  // the same measure for the keyless estimate: each head's output replaced by the mean of its
  // values over the attended tokens (attention that ignores the keys).
  double keyless_rms_vs_exact = 0;
  int coded_tokens = 0;  // tokens held in coded pages at the last checked query
};
// feeds n tokens of synthetic k/v (chunks of `chunk`) through a PagedKvCache of the codec for
// `layer` 0..num_layers-1, then checks the queries of the last chunk on every layer.
PagedCheck CheckPagedDecode(std::unique_ptr<KvCodec> codec, int n, int chunk, uint64_t seed);

// the quantization error of a check against its value measured on the same deterministic data:
// with nothing coded (only fp16 rounding) vs_exact < 1e-3; otherwise vs_exact and rms_vs_exact
// at most kMeasuredMargin times the measured ones. prints measured, bound and the keyless error.
inline constexpr double kMeasuredMargin = 1.25;
void ExpectErrorAsMeasured(const PagedCheck& r, double measured_max, double measured_rms,
                           const std::string& label);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_CODEC_CHECK_H_
