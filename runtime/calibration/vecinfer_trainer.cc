#include "runtime/calibration/vecinfer_trainer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/kmeans.h"

namespace vqserve {

namespace {

// trains the codebooks of every sub-space m of rows (n, D) split into (D/d) sub-vectors of d
// dims; writes (D/d, 2^bits, d) centroids to dst.
void TrainSubspaces(const std::vector<float>& rows, int64_t n, int D, const PqSpec& spec,
                    const VecInferOptions& options, uint64_t seed, float* dst) {
  const int d = spec.sub_dim;
  const int k = 1 << spec.code_bits;
  const int M = D / d;
  kernels::KMeansOptions km;
  km.num_centroids = k;
  km.iterations = options.iterations;
  km.max_samples = options.max_samples > 0 ? options.max_samples : std::min<int64_t>(32LL * k, 32768);
  km.num_threads = options.num_threads;
  std::vector<float> sub(static_cast<size_t>(n) * d);
  for (int m = 0; m < M; ++m) {
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(rows.data() + i * D + m * d, d, sub.data() + i * d);
    }
    km.seed = seed * 1000003ULL + m;
    kernels::KMeansResult r = kernels::TrainKMeans(sub.data(), n, d, km);
    std::copy(r.centroids.begin(), r.centroids.end(), dst + static_cast<size_t>(m) * k * d);
  }
}

}  // namespace

absl::StatusOr<VecInferCodebooks> TrainVecInfer(
    const CalibrationData& data, const VecInferOptions& options,
    const std::function<void(const std::string&)>& progress) {
  const KvShape& s = data.shape;
  auto ks = PqSpecForBits(options.k_bits);
  if (!ks.ok()) return ks.status();
  auto vs = PqSpecForBits(options.v_bits);
  if (!vs.ok()) return vs.status();
  const int D = s.head_dim, H = s.num_kv_heads;
  if (!kernels::IsPowerOfTwo(D) || D % ks->sub_dim || D % vs->sub_dim) {
    return absl::InvalidArgumentError(absl::StrFormat("vecinfer: unsupported head_dim %d", D));
  }
  if (static_cast<int>(data.layers.size()) != s.num_layers) {
    return absl::InvalidArgumentError("vecinfer: calibration data has the wrong number of layers");
  }
  const int G = options.per_head ? H : 1;
  const size_t k_per = static_cast<size_t>(D) << ks->code_bits;  // floats per (layer, g)
  const size_t v_per = static_cast<size_t>(D) << vs->code_bits;
  VecInferCodebooks cb;
  cb.options = options;
  cb.shape = s;
  cb.lambda.assign(static_cast<size_t>(s.num_layers) * H * D, 1.0f);
  cb.k_centroids.assign(s.num_layers * G * k_per, 0.0f);
  cb.v_centroids.assign(s.num_layers * G * v_per, 0.0f);
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerSamples& ls = data.layers[l];
    const int64_t T = ls.num_tokens;
    if (T == 0 || ls.k_rope.size() != static_cast<size_t>(T) * H * D ||
        ls.v.size() != static_cast<size_t>(T) * H * D) {
      return absl::InvalidArgumentError(
          absl::StrFormat("vecinfer: calibration layer %d lacks post-rope keys or values", l));
    }
    float* lam = cb.lambda.data() + static_cast<size_t>(l) * H * D;
    if (options.smoothing) {
      for (int h = 0; h < H; ++h) {
        for (int i = 0; i < D; ++i) {
          float mx = 0;
          for (int64_t t = 0; t < T; ++t) mx = std::max(mx, std::fabs(ls.k_rope[(t * H + h) * D + i]));
          lam[h * D + i] = std::sqrt(std::max(mx, 1e-6f));
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      // rows of this codebook set: every kv head (per layer) or head g (per head).
      std::vector<float> krows, vrows;
      for (int64_t t = 0; t < T; ++t) {
        for (int h = 0; h < H; ++h) {
          if (options.per_head && h != g) continue;
          const float* k = ls.k_rope.data() + (t * H + h) * D;
          size_t at = krows.size();
          krows.resize(at + D);
          for (int i = 0; i < D; ++i) krows[at + i] = k[i] / lam[h * D + i];
          if (options.hadamard) kernels::FastWalshHadamard(krows.data() + at, D);
          const float* v = ls.v.data() + (t * H + h) * D;
          vrows.insert(vrows.end(), v, v + D);
        }
      }
      const int64_t n = static_cast<int64_t>(krows.size() / D);
      const uint64_t seed = options.seed + 7919ULL * (l * G + g);
      TrainSubspaces(krows, n, D, *ks, options, seed, cb.k_centroids.data() + (l * G + g) * k_per);
      TrainSubspaces(vrows, n, D, *vs, options, seed + 1, cb.v_centroids.data() + (l * G + g) * v_per);
    }
    if (progress) {
      progress(absl::StrFormat("vecinfer: layer %d/%d trained (%d tokens)", l + 1, s.num_layers, T));
    }
  }
  return cb;
}

}  // namespace vqserve
