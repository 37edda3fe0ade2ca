#include "runtime/cuda/cuda_random_kv.h"

#include <algorithm>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/model/random_fill.h"

namespace vqserve {

VecInferCodebooks RandomVecInferCodebooks(const KvShape& shape, const VecInferOptions& options,
                                          uint64_t seed) {
  VecInferCodebooks cb;
  cb.options = options;
  cb.shape = shape;
  const int64_t groups = options.per_head ? shape.num_kv_heads : 1;
  // -pca keys: 8-bit codes of calibrated sizes (any whole number a head); else the table's spec.
  const PqSpec k = options.key_pca ? PqSpec{8, 4} : *PqSpecForBits(options.k_bits);
  const PqSpec v = *PqSpecForBits(options.v_bits);
  cb.lambda.assign(size_t(shape.num_layers) * shape.num_kv_heads * shape.head_dim, 1.0f);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // (layers, g, head_dim / d, 2^b, d) = layers * g * head_dim * 2^b floats.
  const int64_t k_groups = options.key_pca ? shape.num_kv_heads : groups;
  cb.k_centroids.resize(size_t(shape.num_layers) * k_groups * shape.head_dim * (1 << k.code_bits));
  cb.v_centroids.resize(size_t(shape.num_layers) * groups * shape.head_dim * (1 << v.code_bits));
  for (float& x : cb.k_centroids) x = u(rng);
  for (float& x : cb.v_centroids) x = u(rng);
  if (options.key_pca) {  // identity transforms, zero means, sub-vectors of 1 .. 8 dims
    const int D = shape.head_dim, mk = VecInferSideGeometry(options.k_bits, true, D)->subvectors;
    const size_t heads = size_t(shape.num_layers) * shape.num_kv_heads;
    cb.k_mean.assign(heads * D, 0.0f);
    cb.k_transform.assign(heads * D * D, 0.0f);
    for (size_t at = 0; at < heads; ++at) {
      for (int i = 0; i < D; ++i) cb.k_transform[(at * D + i) * D + i] = 1.0f;
    }
    cb.k_inverse = cb.k_transform;
    // mk sizes summing to D: the pattern sums to 64 over 16, scaled by D / (4 mk) (halved at
    // twice the codes, doubled at half); the last takes what is left.
    const int sizes[16] = {1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5, 5, 6, 6, 6, 8};
    for (size_t at = 0; at < heads; ++at) {
      int left = D;
      for (int m = 0; m < mk; ++m) {
        const int d = m + 1 == mk ? left : std::max(1, std::min(left - (mk - m - 1), sizes[(m + at) % 16] * D / (4 * mk)));
        cb.k_dims.push_back(d);
        left -= d;
      }
    }
  }
  return cb;
}

CommVqCodebooks RandomCommVqCodebooks(const KvShape& shape, float rope_theta, int key_rounds,
                                      int value_rounds, uint64_t seed) {
  CommVqCodebooks b = *CommVqCodebooks::Create(shape, rope_theta, key_rounds, value_rounds);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int l = 0; l < shape.num_layers; ++l) {
    for (int h = 0; h < shape.num_kv_heads; ++h) {
      for (int r = 0; r < key_rounds; ++r) {
        float* k = b.mutable_key_book(l, h, r);
        for (size_t i = 0; i < b.key_book_floats(); ++i) k[i] = 0.1f * u(rng);
      }
      for (int r = 0; r < value_rounds; ++r) {
        float* v = b.mutable_value_book(l, h, r);
        for (size_t i = 0; i < b.value_book_floats(); ++i) v[i] = u(rng);
      }
    }
  }
  return b;
}

absl::Status FillCudaKvCacheRandom(CudaKvCache& cache, uint64_t seed) {
  const KvCacheSpec& spec = cache.spec();
  const int64_t page_total = static_cast<int64_t>(spec.page_bytes) * cache.num_pages();
  // every slot's rings and sinks, back to back.
  const int64_t slot_halves =
      static_cast<int64_t>(spec.slot_bytes / 2) * cache.num_slots();
  std::string err =
      cache.format() == KvPageFormat::kVecInfer
          ? cuda::LaunchFillRandomBytes(cache.pages(), page_total, seed, nullptr)
          : cuda::LaunchFillRandomHalf(reinterpret_cast<__half*>(cache.pages()), page_total / 2,
                                       1.0f, 0.0f, seed, nullptr);
  if (err.empty() && slot_halves > 0) {
    err = cuda::LaunchFillRandomHalf(reinterpret_cast<__half*>(cache.ring(0, 0)), slot_halves,
                                     1.0f, 0.0f, seed + 1, nullptr);
  }
  if (err.empty()) {
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) err = cudaGetErrorString(e);
  }
  if (!err.empty()) return absl::InternalError(absl::StrCat("random kv fill: ", err));
  return absl::OkStatus();
}

}  // namespace vqserve
