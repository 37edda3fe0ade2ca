#ifndef VQSERVE_RUNTIME_KV_VECINFER_CODEC_H_
#define VQSERVE_RUNTIME_KV_VECINFER_CODEC_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve {

// product-quantizer geometry of one bit width: 2^code_bits centroids of sub_dim dims.
struct PqSpec {
  int code_bits = 8;
  int sub_dim = 4;
};
// bits per element 4, 3, 2, 1.5, 1 -> (8,2), (12,4), (8,4), (12,8), (8,8); error otherwise.
absl::StatusOr<PqSpec> PqSpecForBits(float bits);

// what a vecinfer codec and its calibration are configured with.
struct VecInferOptions {
  float k_bits = 2;
  float v_bits = 2;
  bool smoothing = true;   // per-channel lambda on keys
  bool hadamard = true;    // walsh-hadamard rotation on keys
  bool per_head = false;   // one codebook set per kv head instead of per layer
  // keys in score-whitened principal axes (runtime/calibration/key_pca.h) with sub-vectors of
  // calibrated sizes, one key codebook set per kv head, in place of smoothing and hadamard.
  // 8-bit key codes, head_dim * k_bits / 8 of them: k_bits may be any width that makes that a
  // whole number (2.375 at head_dim 64: 19 codes), not only the table's.
  bool key_pca = false;
  // calibration only:
  int iterations = 30;       // lloyd iterations per codebook
  int64_t max_samples = 0;   // training rows per codebook (0: 32 per centroid, at most 32768)
  uint64_t seed = 1;
  int num_threads = 0;
};

// code width and sub-vectors per head of one side (keys or values) of a vecinfer codec.
struct VecInferSide {
  int code_bits = 8;
  int subvectors = 0;
};
// the table's PqSpec (head_dim divisible by its sub_dim), or with pca head_dim * bits / 8 8-bit
// codes over sub-vectors of calibrated sizes (an error unless a whole number in 1..head_dim);
// head_dim must be a power of two.
absl::StatusOr<VecInferSide> VecInferSideGeometry(float bits, bool pca, int head_dim);

// "vecinfer-k2v2", with suffixes "-nosmooth", "-nohadamard", "-perhead", "-pca" for the options.
std::string VecInferCodecName(const VecInferOptions& options);
// parses a name written by VecInferCodecName.
absl::StatusOr<VecInferOptions> VecInferOptionsForName(const std::string& name);

// calibrated constants of a vecinfer codec. g ranges over kv heads with per_head, else 1.
struct VecInferCodebooks {
  VecInferOptions options;
  KvShape shape;
  std::vector<float> lambda;       // (layers, kv_heads, head_dim); ones without smoothing
  std::vector<float> k_centroids;  // (layers, g, head_dim / dk, 2^bk, dk), transformed space
  std::vector<float> v_centroids;  // (layers, g, head_dim / dv, 2^bv, dv)
  // key_pca only (g = kv_heads for the keys; sub-vector m of a head spans dims
  // [sum k_dims[< m], + k_dims[m]) and its codebook is (2^bk, k_dims[m]) at 2^bk * that offset):
  std::vector<float> k_mean;       // (layers, kv_heads, head_dim)
  std::vector<float> k_transform;  // (layers, kv_heads, head_dim, head_dim) KeyPca::transform
  std::vector<float> k_inverse;    // (layers, kv_heads, head_dim, head_dim) KeyPca::inverse
  std::vector<int32_t> k_dims;     // (layers, kv_heads, mk) sub-vector sizes (mk: VecInferSideGeometry)

  // named little-endian arrays: fp32 "lambda", "k_centroids", "v_centroids"; with key_pca also
  // fp32 "k_mean", "k_transform", "k_inverse" and int32 "k_dims".
  std::map<std::string, std::string> ToBlobs() const;
  // rebuilds from blobs, checking every size against shape and options.
  static absl::StatusOr<VecInferCodebooks> FromBlobs(const KvShape& shape,
                                                     const VecInferOptions& options,
                                                     const std::map<std::string, std::string>& blobs);
};

// the -pca key transform of kv head h of `layer`: y = (k - k_mean) k_transform (D dims each).
void PcaTransformKey(const VecInferCodebooks& cb, int layer, int h, const float* k, float* y);

// the vecinfer codec over fixed codebooks (shape must equal codebooks->shape).
std::unique_ptr<KvCodec> MakeVecInferCodec(std::shared_ptr<const VecInferCodebooks> codebooks);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_VECINFER_CODEC_H_
