#include "runtime/calibration/vecinfer_trainer.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_format.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/kmeans.h"
#include "kernels/cpu/rope.h"
#include "runtime/calibration/key_pca.h"

namespace vqserve {

namespace {

// trains the codebooks of every sub-space m of rows (n, D) split into sub-vectors of dims[m]
// dims (consecutive, summing to D); writes each (2^code_bits, dims[m]) codebook to dst, back to
// back.
void TrainSubspaces(const std::vector<float>& rows, int64_t n, int D, const std::vector<int32_t>& dims,
                    int code_bits, const VecInferOptions& options, uint64_t seed, float* dst) {
  const int k = 1 << code_bits;
  kernels::KMeansOptions km;
  km.num_centroids = k;
  km.iterations = options.iterations;
  km.max_samples = options.max_samples > 0 ? options.max_samples : std::min<int64_t>(32LL * k, 32768);
  km.num_threads = options.num_threads;
  std::vector<float> sub;
  int off = 0;
  for (size_t m = 0; m < dims.size(); ++m) {
    const int d = dims[m];
    sub.resize(static_cast<size_t>(n) * d);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(rows.data() + i * D + off, d, sub.data() + i * d);
    }
    km.seed = seed * 1000003ULL + m;
    kernels::KMeansResult r = kernels::TrainKMeans(sub.data(), n, d, km);
    std::copy(r.centroids.begin(), r.centroids.end(), dst + static_cast<size_t>(off) * k);
    off += d;
  }
}

std::vector<int32_t> EvenDims(int D, const VecInferSide& side) {
  return std::vector<int32_t>(side.subvectors, D / side.subvectors);
}

// fits the -pca transform of every kv head of layer l and trains its key codebooks.
absl::Status TrainPcaKeys(const CalibrationData& data, int l, const VecInferSide& ks,
                          const VecInferOptions& options, VecInferCodebooks* cb) {
  const KvShape& s = data.shape;
  const LayerSamples& ls = data.layers[l];
  const int D = s.head_dim, H = s.num_kv_heads, mk = ks.subvectors;
  const size_t DD = static_cast<size_t>(D) * D;
  if (ls.q_moment.size() != H * DD) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vecinfer -pca: calibration layer %d lacks the queries' second moments", l));
  }
  const int64_t T = ls.num_tokens;
  // keys and queries as at positions spread over the context: the calibration sequences are
  // short, and rope moves the keys' low-frequency pairs far from where they start. scores depend
  // on relative positions only, so a shifted key is exactly the key of the same text further on.
  const bool shift = data.context_length > 0 && !data.rope_freqs.empty();
  std::vector<float> keys(static_cast<size_t>(T) * D);
  for (int h = 0; h < H; ++h) {
    const size_t at = static_cast<size_t>(l) * H + h;
    const uint64_t seed = options.seed + 7919ULL * at;
    std::vector<double> qm(ls.q_moment.begin() + h * DD, ls.q_moment.begin() + (h + 1) * DD);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> position(0.0, std::max(data.context_length, 1));
    std::vector<int32_t> shifts(T);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(ls.k_rope.data() + (t * H + h) * D, D, keys.data() + t * D);
      shifts[t] = static_cast<int32_t>(std::floor(position(rng)));
    }
    // rope at p, then at s, is rope at p + s.
    if (shift) cpu::ApplyRope(keys.data(), static_cast<int>(T), 1, D, shifts.data(), data.rope_freqs);
    if (shift) qm = ShiftAveragedMoment(qm, D, data.rope_freqs, data.context_length, 256, seed + 1);
    KeyPca pca = FitKeyPca(keys.data(), T, D, qm, D);
    std::vector<int32_t> dims = SplitAxes(pca.variances, mk, ks.code_bits, std::min(D, 32));
    if (static_cast<int>(dims.size()) != mk) {
      return absl::InvalidArgumentError(absl::StrFormat("vecinfer -pca: cannot split %d dims into %d", D, mk));
    }
    std::copy(pca.mean.begin(), pca.mean.end(), cb->k_mean.begin() + at * D);
    std::copy(pca.transform.begin(), pca.transform.end(), cb->k_transform.begin() + at * DD);
    std::copy(pca.inverse.begin(), pca.inverse.end(), cb->k_inverse.begin() + at * DD);
    std::copy(dims.begin(), dims.end(), cb->k_dims.begin() + at * mk);
    std::vector<float> rows(static_cast<size_t>(T) * D);
    for (int64_t t = 0; t < T; ++t) PcaTransformKey(*cb, l, h, keys.data() + t * D, rows.data() + t * D);
    TrainSubspaces(rows, T, D, dims, ks.code_bits, options, seed,
                   cb->k_centroids.data() + at * (static_cast<size_t>(D) << ks.code_bits));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VecInferCodebooks> TrainVecInfer(
    const CalibrationData& data, const VecInferOptions& options,
    const std::function<void(const std::string&)>& progress) {
  const KvShape& s = data.shape;
  const int D = s.head_dim, H = s.num_kv_heads;
  auto ks = VecInferSideGeometry(options.k_bits, options.key_pca, D);
  if (!ks.ok()) return ks.status();
  auto vs = VecInferSideGeometry(options.v_bits, false, D);
  if (!vs.ok()) return vs.status();
  if (static_cast<int>(data.layers.size()) != s.num_layers) {
    return absl::InvalidArgumentError("vecinfer: calibration data has the wrong number of layers");
  }
  if (options.key_pca && (!options.smoothing || !options.hadamard)) {
    return absl::InvalidArgumentError("vecinfer -pca: replaces smoothing and hadamard");
  }
  const int G = options.per_head ? H : 1;
  const int GK = options.key_pca ? H : G;
  const size_t k_per = static_cast<size_t>(D) << ks->code_bits;  // floats per (layer, g)
  const size_t v_per = static_cast<size_t>(D) << vs->code_bits;
  const size_t heads = static_cast<size_t>(s.num_layers) * H;
  VecInferCodebooks cb;
  cb.options = options;
  cb.shape = s;
  cb.lambda.assign(heads * D, 1.0f);
  cb.k_centroids.assign(s.num_layers * GK * k_per, 0.0f);
  cb.v_centroids.assign(s.num_layers * G * v_per, 0.0f);
  if (options.key_pca) {
    cb.k_mean.assign(heads * D, 0.0f);
    cb.k_transform.assign(heads * D * D, 0.0f);
    cb.k_inverse.assign(heads * D * D, 0.0f);
    cb.k_dims.assign(heads * ks->subvectors, 0);
  }
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerSamples& ls = data.layers[l];
    const int64_t T = ls.num_tokens;
    if (T == 0 || ls.k_rope.size() != static_cast<size_t>(T) * H * D ||
        ls.v.size() != static_cast<size_t>(T) * H * D) {
      return absl::InvalidArgumentError(
          absl::StrFormat("vecinfer: calibration layer %d lacks post-rope keys or values", l));
    }
    float* lam = cb.lambda.data() + static_cast<size_t>(l) * H * D;
    if (options.key_pca) {
      if (absl::Status st = TrainPcaKeys(data, l, *ks, options, &cb); !st.ok()) return st;
    } else if (options.smoothing) {
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
          if (!options.key_pca) {
            const float* k = ls.k_rope.data() + (t * H + h) * D;
            size_t at = krows.size();
            krows.resize(at + D);
            for (int i = 0; i < D; ++i) krows[at + i] = k[i] / lam[h * D + i];
            if (options.hadamard) kernels::FastWalshHadamard(krows.data() + at, D);
          }
          const float* v = ls.v.data() + (t * H + h) * D;
          vrows.insert(vrows.end(), v, v + D);
        }
      }
      const int64_t n = static_cast<int64_t>(vrows.size() / D);
      const uint64_t seed = options.seed + 7919ULL * (l * G + g);
      if (!options.key_pca) {
        TrainSubspaces(krows, n, D, EvenDims(D, *ks), ks->code_bits, options, seed,
                       cb.k_centroids.data() + (l * G + g) * k_per);
      }
      TrainSubspaces(vrows, n, D, EvenDims(D, *vs), vs->code_bits, options, seed + 1,
                     cb.v_centroids.data() + (l * G + g) * v_per);
    }
    if (progress) {
      progress(absl::StrFormat("vecinfer: layer %d/%d trained (%d tokens)", l + 1, s.num_layers, T));
    }
  }
  return cb;
}

}  // namespace vqserve
