#ifndef VQSERVE_KERNELS_CPU_KMEANS_H_
#define VQSERVE_KERNELS_CPU_KMEANS_H_

#include <cstdint>
#include <vector>

namespace vqserve::kernels {

// exact nearest-centroid search (squared l2) over a fixed set of centroids, vectorized over
// centroids: centroids are stored transposed (dim, k padded to 8) with their squared norms.
class NearestCentroidIndex {
 public:
  NearestCentroidIndex() = default;
  // centroids: (k, dim).
  NearestCentroidIndex(const float* centroids, int k, int dim);
  int k() const { return k_; }
  int dim() const { return dim_; }
  // index of the centroid nearest to x (dim); ties go to the lower index.
  int Nearest(const float* x) const;
  // nearest index of each row of x (n, dim) into out (n), split over num_threads threads.
  void NearestRows(const float* x, int64_t n, int32_t* out, int num_threads) const;

 private:
  int k_ = 0;
  int dim_ = 0;
  int k_padded_ = 0;
  std::vector<float> transposed_;  // (dim, k_padded)
  std::vector<float> norms_;       // (k_padded), +inf on padding
};

struct KMeansOptions {
  int num_centroids = 256;
  int iterations = 30;     // lloyd iterations at most (stops early once assignments settle)
  uint64_t seed = 1;       // fixes k-means++ seeding and subsampling
  int64_t max_samples = 0; // train on a seeded subsample of this many rows (0: all rows)
  int num_threads = 0;     // assignment threads (0: hardware concurrency)
};

struct KMeansResult {
  std::vector<float> centroids;  // (num_centroids, dim)
  double inertia = 0;            // mean squared distance of the training rows after the last step
  std::vector<double> inertia_history;  // mean squared distance after each lloyd step
};

// k-means++ initialisation then lloyd iterations. data: (n, dim). when n < num_centroids the
// missing centroids repeat training rows. deterministic for a given seed and thread count.
KMeansResult TrainKMeans(const float* data, int64_t n, int dim, const KMeansOptions& options);

// a small deterministic generator (splitmix64) so results do not depend on the standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();  // [0, 1)
 private:
  uint64_t state_;
};

}  // namespace vqserve::kernels

#endif  // VQSERVE_KERNELS_CPU_KMEANS_H_
