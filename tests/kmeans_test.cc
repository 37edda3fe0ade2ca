// k-means and nearest-centroid search against brute-force float64 references.
#include "kernels/cpu/kmeans.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace vqserve::kernels {
namespace {

int BruteNearest(const float* x, const std::vector<float>& c, int k, int dim) {
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int j = 0; j < k; ++j) {
    double d = 0;
    for (int i = 0; i < dim; ++i) {
      double e = double(x[i]) - c[j * dim + i];
      d += e * e;
    }
    if (d < best_d) {
      best_d = d;
      best = j;
    }
  }
  return best;
}

double Dist2(const float* x, const float* c, int dim) {
  double d = 0;
  for (int i = 0; i < dim; ++i) d += (double(x[i]) - c[i]) * (double(x[i]) - c[i]);
  return d;
}

TEST(KMeansTest, NearestMatchesBruteForce) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (auto [k, dim] : {std::pair{4096, 8}, {256, 2}, {256, 4}, {13, 3}}) {
    std::vector<float> c(k * dim), x(500 * dim);
    for (float& v : c) v = normal(rng);
    for (float& v : x) v = normal(rng);
    NearestCentroidIndex index(c.data(), k, dim);
    std::vector<int32_t> got(500);
    index.NearestRows(x.data(), 500, got.data(), 2);
    for (int i = 0; i < 500; ++i) {
      int want = BruteNearest(x.data() + i * dim, c, k, dim);
      // float rounding may pick an equally near centroid; the distances must agree.
      EXPECT_NEAR(Dist2(x.data() + i * dim, c.data() + got[i] * dim, dim),
                  Dist2(x.data() + i * dim, c.data() + want * dim, dim), 1e-4)
          << k << "x" << dim;
    }
  }
}

TEST(KMeansTest, RecoversSeparatedClustersAndInertiaNeverIncreases) {
  const int dim = 4, k = 8, per = 300;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> centers(k * dim), data;
  for (float& v : centers) v = 10.0f * normal(rng);
  for (int i = 0; i < per; ++i) {
    for (int c = 0; c < k; ++c) {
      for (int j = 0; j < dim; ++j) data.push_back(centers[c * dim + j] + 0.1f * normal(rng));
    }
  }
  KMeansOptions opt;
  opt.num_centroids = k;
  opt.iterations = 30;
  opt.seed = 1;
  KMeansResult r = TrainKMeans(data.data(), k * per, dim, opt);
  for (int c = 0; c < k; ++c) {
    int j = BruteNearest(centers.data() + c * dim, r.centroids, k, dim);
    EXPECT_LT(std::sqrt(Dist2(centers.data() + c * dim, r.centroids.data() + j * dim, dim)), 0.05);
  }
  for (size_t i = 1; i < r.inertia_history.size(); ++i) {
    EXPECT_LE(r.inertia_history[i], r.inertia_history[i - 1] * (1 + 1e-9));
  }
  EXPECT_LT(r.inertia, 0.1 * 0.1 * dim * 1.5);
}

TEST(KMeansTest, DeterministicForSeedAndThreads) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> data(20000 * 8);
  for (float& v : data) v = normal(rng);
  KMeansOptions opt;
  opt.num_centroids = 256;
  opt.iterations = 5;
  opt.max_samples = 8000;
  opt.num_threads = 1;
  KMeansResult a = TrainKMeans(data.data(), 20000, 8, opt);
  opt.num_threads = 2;
  KMeansResult b = TrainKMeans(data.data(), 20000, 8, opt);
  EXPECT_EQ(a.centroids, b.centroids);
  opt.seed = 2;
  KMeansResult c = TrainKMeans(data.data(), 20000, 8, opt);
  EXPECT_NE(a.centroids, c.centroids);
  // more centroids than rows: every row becomes a centroid (zero inertia).
  opt.num_centroids = 4096;
  KMeansResult d = TrainKMeans(data.data(), 100, 8, opt);
  EXPECT_NEAR(d.inertia, 0.0, 1e-9);
}

}  // namespace
}  // namespace vqserve::kernels
