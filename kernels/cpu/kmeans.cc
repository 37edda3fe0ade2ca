#include "kernels/cpu/kmeans.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace vqserve::kernels {

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix64::Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }

NearestCentroidIndex::NearestCentroidIndex(const float* centroids, int k, int dim)
    : k_(k), dim_(dim), k_padded_((k + 7) / 8 * 8) {
  transposed_.assign(static_cast<size_t>(dim) * k_padded_, 0.0f);
  norms_.assign(k_padded_, std::numeric_limits<float>::infinity());
  for (int c = 0; c < k; ++c) {
    float norm = 0;
    for (int j = 0; j < dim; ++j) {
      float v = centroids[static_cast<size_t>(c) * dim + j];
      transposed_[static_cast<size_t>(j) * k_padded_ + c] = v;
      norm += v * v;
    }
    norms_[c] = norm;
  }
}

int NearestCentroidIndex::Nearest(const float* x) const {
  // distance up to the constant |x|^2: |c|^2 - 2 x.c, eight centroids per step.
  __m256 best = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256i best_idx = _mm256_setzero_si256();
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  float x2[64];
  const bool small = dim_ <= 64;
  if (small) {
    for (int j = 0; j < dim_; ++j) x2[j] = -2.0f * x[j];
  }
  for (int c = 0; c < k_padded_; c += 8) {
    __m256 acc = _mm256_loadu_ps(norms_.data() + c);
    const float* t = transposed_.data() + c;
    for (int j = 0; j < dim_; ++j) {
      float xj = small ? x2[j] : -2.0f * x[j];
      acc = _mm256_fmadd_ps(_mm256_set1_ps(xj), _mm256_loadu_ps(t + static_cast<size_t>(j) * k_padded_),
                            acc);
    }
    __m256 lt = _mm256_cmp_ps(acc, best, _CMP_LT_OQ);
    best = _mm256_blendv_ps(best, acc, lt);
    best_idx = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(best_idx), _mm256_castsi256_ps(idx), lt));
    idx = _mm256_add_epi32(idx, step);
  }
  alignas(32) float d[8];
  alignas(32) int32_t id[8];
  _mm256_store_ps(d, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(id), best_idx);
  int out = id[0];
  float out_d = d[0];
  for (int i = 1; i < 8; ++i) {
    if (d[i] < out_d || (d[i] == out_d && id[i] < out)) {
      out_d = d[i];
      out = id[i];
    }
  }
  return out;
}

void NearestCentroidIndex::NearestRows(const float* x, int64_t n, int32_t* out,
                                       int num_threads) const {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = Nearest(x + i * dim_);
  };
  num_threads = std::max(1, num_threads);
  if (num_threads == 1 || n < 256) {
    run(0, n);
    return;
  }
  std::vector<std::thread> threads;
  int64_t chunk = (n + num_threads - 1) / num_threads;
  for (int t = 0; t < num_threads; ++t) {
    int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back(run, b, e);
  }
  for (auto& th : threads) th.join();
}

namespace {

double SquaredDistance(const float* a, const float* b, int dim) {
  double s = 0;
  for (int j = 0; j < dim; ++j) {
    double d = static_cast<double>(a[j]) - b[j];
    s += d * d;
  }
  return s;
}

// k-means++: each next centroid is a row drawn with probability proportional to its squared
// distance from the nearest centroid chosen so far.
void SeedPlusPlus(const float* data, int64_t n, int dim, int k, SplitMix64& rng, float* centroids) {
  std::vector<float> min_d(n, std::numeric_limits<float>::infinity());
  int64_t first = static_cast<int64_t>(rng.Uniform() * n);
  std::copy_n(data + first * dim, dim, centroids);
  for (int c = 1; c < k; ++c) {
    const float* last = centroids + static_cast<size_t>(c - 1) * dim;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* x = data + i * dim;
      float d = 0;
      for (int j = 0; j < dim; ++j) d += (x[j] - last[j]) * (x[j] - last[j]);
      min_d[i] = std::min(min_d[i], d);
      total += min_d[i];
    }
    int64_t pick = static_cast<int64_t>(rng.Uniform() * n);
    if (total > 0) {
      double target = rng.Uniform() * total;
      double run = 0;
      pick = n - 1;
      for (int64_t i = 0; i < n; ++i) {
        run += min_d[i];
        if (run > target) {
          pick = i;
          break;
        }
      }
    }
    std::copy_n(data + pick * dim, dim, centroids + static_cast<size_t>(c) * dim);
  }
}

}  // namespace

KMeansResult TrainKMeans(const float* data, int64_t n, int dim, const KMeansOptions& options) {
  const int k = options.num_centroids;
  SplitMix64 rng(options.seed);
  int threads = options.num_threads > 0
                    ? options.num_threads
                    : std::max(1u, std::thread::hardware_concurrency());
  // seeded subsample (partial fisher-yates over row indices).
  std::vector<float> sub;
  if (options.max_samples > 0 && n > options.max_samples) {
    std::vector<int64_t> idx(n);
    for (int64_t i = 0; i < n; ++i) idx[i] = i;
    int64_t m = options.max_samples;
    sub.resize(static_cast<size_t>(m) * dim);
    for (int64_t i = 0; i < m; ++i) {
      int64_t j = i + static_cast<int64_t>(rng.Uniform() * (n - i));
      std::swap(idx[i], idx[j]);
      std::copy_n(data + idx[i] * dim, dim, sub.data() + i * dim);
    }
    data = sub.data();
    n = m;
  }
  KMeansResult result;
  result.centroids.assign(static_cast<size_t>(k) * dim, 0.0f);
  if (n == 0) return result;
  int seeded = static_cast<int>(std::min<int64_t>(k, n));
  SeedPlusPlus(data, n, dim, seeded, rng, result.centroids.data());
  for (int c = seeded; c < k; ++c) {
    std::copy_n(data + (c % n) * dim, dim, result.centroids.data() + static_cast<size_t>(c) * dim);
  }

  std::vector<int32_t> assign(n, -1), next(n);
  std::vector<double> sums(static_cast<size_t>(k) * dim);
  std::vector<int64_t> counts(k);
  for (int it = 0; it < options.iterations; ++it) {
    NearestCentroidIndex index(result.centroids.data(), k, dim);
    index.NearestRows(data, n, next.data(), threads);
    int64_t changed = 0;
    for (int64_t i = 0; i < n; ++i) changed += next[i] != assign[i];
    assign.swap(next);
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      double* s = sums.data() + static_cast<size_t>(assign[i]) * dim;
      for (int j = 0; j < dim; ++j) s[j] += data[i * dim + j];
      counts[assign[i]]++;
    }
    for (int c = 0; c < k; ++c) {
      float* cen = result.centroids.data() + static_cast<size_t>(c) * dim;
      if (counts[c] > 0) {
        for (int j = 0; j < dim; ++j) cen[j] = static_cast<float>(sums[static_cast<size_t>(c) * dim + j] / counts[c]);
      } else {
        // empty cluster: restart it on a random training row.
        int64_t pick = static_cast<int64_t>(rng.Uniform() * n);
        std::copy_n(data + pick * dim, dim, cen);
      }
    }
    double inertia = 0;
    for (int64_t i = 0; i < n; ++i) {
      inertia += SquaredDistance(data + i * dim, result.centroids.data() + static_cast<size_t>(assign[i]) * dim, dim);
    }
    result.inertia = inertia / n;
    result.inertia_history.push_back(result.inertia);
    if (changed == 0) break;
  }
  return result;
}

}  // namespace vqserve::kernels
