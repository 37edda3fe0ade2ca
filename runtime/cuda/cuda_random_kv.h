#ifndef VQSERVE_RUNTIME_CUDA_CUDA_RANDOM_KV_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_RANDOM_KV_H_

// random but valid kv cache contents for benchmarks of the cuda runtime at long contexts,
// without running the prefills (decode speed does not depend on kv values).

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/kv/commvq_codebooks.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/vecinfer_codec.h"

namespace vqserve {

// vecinfer codebooks of `shape` and `options` with lambda = 1 and centroids uniform in
// [-1, 1) (-pca keys: identity transforms and sub-vectors of varied sizes), deterministic in
// `seed`; valid for MakeCudaVecInferKvCache. needs no device.
VecInferCodebooks RandomVecInferCodebooks(const KvShape& shape, const VecInferOptions& options,
                                          uint64_t seed);

// commvq codebooks of `shape` with `key_rounds` / `value_rounds` rounds and rope base
// `rope_theta`: key entries uniform in [-0.1, 0.1), value centroids in [-1, 1), deterministic in
// `seed`; valid for MakeCudaCommVqKvCache. needs no device.
CommVqCodebooks RandomCommVqCodebooks(const KvShape& shape, float rope_theta, int key_rounds,
                                      int value_rounds, uint64_t seed);

// fills every page and residual ring of `cache` on the device: fp16 pages and rings with
// finite values uniform in [-1, 1) (commvq pages the same bits: any 12-bit and 8-bit code is
// valid, the scales finite), vecinfer pages with uniform random 8-bit codes. any
// sequence may then claim any pages and slot with any num_cached. an error without cuda.
absl::Status FillCudaKvCacheRandom(CudaKvCache& cache, uint64_t seed);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_RANDOM_KV_H_
