#include "runtime/cuda/cuda_random_kv.h"

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
  const PqSpec k = *PqSpecForBits(options.k_bits), v = *PqSpecForBits(options.v_bits);
  cb.lambda.assign(size_t(shape.num_layers) * shape.num_kv_heads * shape.head_dim, 1.0f);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // (layers, g, head_dim / d, 2^b, d) = layers * g * head_dim * 2^b floats.
  cb.k_centroids.resize(size_t(shape.num_layers) * groups * shape.head_dim * (1 << k.code_bits));
  cb.v_centroids.resize(size_t(shape.num_layers) * groups * shape.head_dim * (1 << v.code_bits));
  for (float& x : cb.k_centroids) x = u(rng);
  for (float& x : cb.v_centroids) x = u(rng);
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
