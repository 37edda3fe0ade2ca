#include "runtime/calibration/commvq_trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "runtime/calibration/commvq_em.h"
#include "runtime/kv/commvq_math.h"
#include "runtime/gguf/ggml_type.h"

namespace vqserve {
namespace {

constexpr int kE = kCommVqKeyEntries;
constexpr int kVe = kCommVqValueEntries;
constexpr int kVd = kCommVqValueSubdim;

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// up to `limit` distinct token indices of [0, n), in increasing order.
std::vector<int> Subsample(int n, int limit, std::mt19937_64& rng) {
  std::vector<int> idx(n);
  for (int i = 0; i < n; ++i) idx[i] = i;
  if (limit > 0 && n > limit) {
    for (int i = 0; i < limit; ++i) {
      int j = i + static_cast<int>(rng() % (n - i));
      std::swap(idx[i], idx[j]);
    }
    idx.resize(limit);
    std::sort(idx.begin(), idx.end());
  }
  return idx;
}

// lloyd k-means of n points of 8 dims into 256 centroids (k-means++ init); centroids (256, 8).
void KMeans8(const float* x, int n, int iters, std::mt19937_64& rng, float* centroids) {
  std::vector<float> ct(kVd * kVe);  // transposed (8, 256) for the assignment loop
  std::vector<double> d2(n, std::numeric_limits<double>::infinity());
  auto dist = [&](const float* a, const float* b) {
    double s = 0;
    for (int e = 0; e < kVd; ++e) s += double{a[e] - b[e]} * (a[e] - b[e]);
    return s;
  };
  int first = static_cast<int>(rng() % n);
  std::memcpy(centroids, x + size_t{1} * first * kVd, kVd * sizeof(float));
  for (int c = 1; c < kVe; ++c) {
    double total = 0;
    for (int i = 0; i < n; ++i) {
      d2[i] = std::min(d2[i], dist(x + size_t{1} * i * kVd, centroids + (c - 1) * kVd));
      total += d2[i];
    }
    int pick = static_cast<int>(rng() % n);
    if (total > 0) {
      double r = std::uniform_real_distribution<double>(0.0, total)(rng);
      for (int i = 0; i < n; ++i) {
        r -= d2[i];
        if (r <= 0) {
          pick = i;
          break;
        }
      }
    }
    std::memcpy(centroids + c * kVd, x + size_t{1} * pick * kVd, kVd * sizeof(float));
  }
  std::vector<int> assign(n);
  std::vector<float> dd(kVe);
  std::vector<double> sums(kVe * kVd), err(n);
  std::vector<int> counts(kVe);
  for (int it = 0; it < iters; ++it) {
    for (int c = 0; c < kVe; ++c) {
      for (int e = 0; e < kVd; ++e) ct[e * kVe + c] = centroids[c * kVd + e];
    }
    for (int i = 0; i < n; ++i) {
      const float* xi = x + size_t{1} * i * kVd;
      std::fill(dd.begin(), dd.end(), 0.0f);
      for (int e = 0; e < kVd; ++e) {
        const float xe = xi[e];
        const float* row = &ct[e * kVe];
        for (int c = 0; c < kVe; ++c) dd[c] += (xe - row[c]) * (xe - row[c]);
      }
      int best = 0;
      for (int c = 1; c < kVe; ++c) {
        if (dd[c] < dd[best]) best = c;
      }
      assign[i] = best;
      err[i] = dd[best];
    }
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (int i = 0; i < n; ++i) {
      ++counts[assign[i]];
      for (int e = 0; e < kVd; ++e) sums[assign[i] * kVd + e] += x[size_t{1} * i * kVd + e];
    }
    for (int c = 0; c < kVe; ++c) {
      if (counts[c] > 0) {
        for (int e = 0; e < kVd; ++e) centroids[c * kVd + e] = sums[c * kVd + e] / counts[c];
      } else {  // empty: move to the worst-served point
        int far = static_cast<int>(std::max_element(err.begin(), err.end()) - err.begin());
        std::memcpy(centroids + c * kVd, x + size_t{1} * far * kVd, kVd * sizeof(float));
        err[far] = 0;
      }
    }
  }
}

struct JobResult {
  std::vector<double> key_rel_err;    // per key round: residual energy / key energy
  std::vector<double> value_rel_err;  // per value round
};

// trains every round of one (layer, kv head).
JobResult TrainHead(const CalibrationData& data, const CommVqOptions& options, int layer, int h,
                    CommVqCodebooks* books) {
  const KvShape& s = data.shape;
  const int D = s.head_dim, H = s.num_kv_heads, half = D / 2;
  const int g = books->group_pairs(), ng = books->groups_per_head();
  const LayerSamples& ls = data.layers[layer];
  std::mt19937_64 rng(Mix(options.seed ^ Mix(uint64_t(layer) * 4099 + h)));
  JobResult res;

  // keys: normalized by their fp16 norm, as the codec does.
  std::vector<int> kidx = Subsample(ls.num_tokens, options.max_vectors, rng);
  std::vector<float> keys;
  keys.reserve(kidx.size() * D);
  for (int t : kidx) {
    const float* k = ls.k_pre_rope.data() + (size_t{1} * t * H + h) * D;
    double ss = 0;
    for (int d = 0; d < D; ++d) ss += double{k[d]} * k[d];
    float norm = HalfToFloat(FloatToHalf(static_cast<float>(std::min(std::sqrt(ss), 65504.0))));
    if (!(norm > 0)) continue;
    for (int d = 0; d < D; ++d) keys.push_back(k[d] / norm);
  }
  const int nk = static_cast<int>(keys.size() / D);
  std::vector<double> key_energy(options.key_rounds, 0.0);
  double key_total = 0;
  for (float f : keys) key_total += double{f} * f;
  std::vector<float> z(size_t{1} * nk * 2 * g), base(kE * kE), u(size_t{1} * nk * 2 * kE);
  for (int gi = 0; gi < ng; ++gi) {
    for (int i = 0; i < nk; ++i) {
      std::memcpy(&z[size_t{1} * i * 2 * g], &keys[size_t{1} * i * D + gi * 2 * g],
                  2 * g * sizeof(float));
    }
    for (int r = 0; r < options.key_rounds; ++r) {
      commvq::EmOptions eo;
      eo.steps = options.em_steps;
      eo.temp_start = options.temp_start;
      eo.temp_end = options.temp_end;
      eo.seed = rng();
      commvq::EmResult em = commvq::TrainCommutativeBook(z.data(), nk, g, eo);
      float* book = books->mutable_key_book(layer, h, r) + gi * 2 * g;
      for (int e = 0; e < kE; ++e) {
        std::memcpy(book + size_t{1} * e * half * 2, &em.book[size_t{1} * e * 2 * g],
                    2 * g * sizeof(float));
      }
      // hard residual for the next round, exactly as the encoder computes it.
      commvq::CentreNorms(book, half, g, base.data());
      commvq::ProjectOnEntries(z.data(), nk, book, half, g, u.data());
      for (int i = 0; i < nk; ++i) {
        int code = commvq::NearestCode(base.data(), &u[size_t{1} * i * 2 * kE], nullptr);
        commvq::AddCentre(book, half, g, code, -1.0f, &z[size_t{1} * i * 2 * g]);
        for (int k = 0; k < 2 * g; ++k) {
          key_energy[r] += double{z[size_t{1} * i * 2 * g + k]} * z[size_t{1} * i * 2 * g + k];
        }
      }
    }
  }
  for (int r = 0; r < options.key_rounds; ++r) {
    res.key_rel_err.push_back(key_total > 0 ? key_energy[r] / key_total : 0.0);
  }

  // values: residual k-means per 8-dim sub-vector.
  std::vector<int> vidx = Subsample(ls.num_tokens, options.max_value_vectors, rng);
  const int nv = static_cast<int>(vidx.size());
  const int m_count = D / kVd;
  std::vector<float> vres(size_t{1} * nv * D), sub(size_t{1} * nv * kVd);
  double v_total = 0;
  for (int i = 0; i < nv; ++i) {
    std::memcpy(&vres[size_t{1} * i * D], ls.v.data() + (size_t{1} * vidx[i] * H + h) * D,
                D * sizeof(float));
  }
  for (float f : vres) v_total += double{f} * f;
  for (int r = 0; r < options.value_rounds; ++r) {
    float* vb = books->mutable_value_book(layer, h, r);
    for (int m = 0; m < m_count; ++m) {
      for (int i = 0; i < nv; ++i) {
        std::memcpy(&sub[size_t{1} * i * kVd], &vres[size_t{1} * i * D + m * kVd],
                    kVd * sizeof(float));
      }
      float* cents = vb + size_t{1} * m * kVe * kVd;
      if (nv > 0) KMeans8(sub.data(), nv, options.kmeans_iters, rng, cents);
      for (int i = 0; i < nv; ++i) {
        float* xs = &vres[size_t{1} * i * D + m * kVd];
        int c = commvq::NearestValueCentroid(cents, xs);
        for (int e = 0; e < kVd; ++e) xs[e] -= cents[c * kVd + e];
      }
    }
    double e = 0;
    for (float f : vres) e += double{f} * f;
    res.value_rel_err.push_back(v_total > 0 ? e / v_total : 0.0);
  }
  return res;
}

absl::Status Validate(const CalibrationData& data, const CommVqOptions& o) {
  const KvShape& s = data.shape;
  if (static_cast<int>(data.layers.size()) != s.num_layers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "commvq training: %d layers of samples for a %d-layer shape", data.layers.size(),
        s.num_layers));
  }
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerSamples& ls = data.layers[l];
    size_t want = size_t{1} * ls.num_tokens * s.num_kv_heads * s.head_dim;
    if (ls.num_tokens <= 0 || ls.k_pre_rope.size() != want || ls.v.size() != want) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "commvq training: layer %d has %d tokens but %d pre-rope key / %d value floats "
          "(need %d of each)",
          l, ls.num_tokens, ls.k_pre_rope.size(), ls.v.size(), want));
    }
  }
  if (o.em_steps < 1 || o.max_vectors < 1 || o.max_value_vectors < 1 || o.kmeans_iters < 1 ||
      !(o.temp_start > 0) || !(o.temp_end > 0)) {
    return absl::InvalidArgumentError("commvq training: bad options (steps, sizes, temperatures)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommVqCodebooks> TrainCommVq(
    const CalibrationData& data, const CommVqOptions& options,
    const std::function<void(const std::string&)>& progress) {
  absl::StatusOr<CommVqCodebooks> books =
      CommVqCodebooks::Create(data.shape, data.rope_theta, options.key_rounds,
                              options.value_rounds);
  if (!books.ok()) return books.status();
  if (absl::Status st = Validate(data, options); !st.ok()) return st;
  const int H = data.shape.num_kv_heads, jobs = data.shape.num_layers * H;
  std::atomic<int> next{0};
  std::mutex mu;
  int done = 0;
  auto worker = [&]() {
    for (int j = next++; j < jobs; j = next++) {
      auto t0 = std::chrono::steady_clock::now();
      JobResult r = TrainHead(data, options, j / H, j % H, &*books);
      double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (progress) {
        progress(absl::StrFormat(
            "commvq %d/%d layer %d head %d: key rel err r1 %.4f r%d %.4f, value rel err r1 "
            "%.4f r%d %.4f (%.1f s)",
            done, jobs, j / H, j % H, r.key_rel_err.front(), options.key_rounds,
            r.key_rel_err.back(), r.value_rel_err.front(), options.value_rounds,
            r.value_rel_err.back(), secs));
      }
    }
  };
  int threads = std::clamp(options.num_threads, 1, std::max(1, jobs));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return books;
}

}  // namespace vqserve
