#include "runtime/cuda_kv_cache.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/fp16_codec.h"

#if VQSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vqserve {

#if VQSERVE_WITH_CUDA

CudaKvCache::~CudaKvCache() {
  if (pages_ != nullptr) cudaFree(pages_);
  if (rings_ != nullptr) cudaFree(rings_);
}

void CudaKvCache::Append(int, const KvSeqRef&, int, const float*, const float*, const float*) {
  std::fprintf(stderr, "CudaKvCache: host Append is not offered; the cuda model appends\n");
  std::abort();
}

void CudaKvCache::Attend(int, const KvSeqRef&, int, const float*, float*) {
  std::fprintf(stderr, "CudaKvCache: host Attend is not offered; the cuda model attends\n");
  std::abort();
}

uint16_t* CudaKvCache::ring(int layer, int which) const {
  const int64_t array = ring_slot_stride_ / 2;
  return rings_ + ring_slot_stride_ * (static_cast<int64_t>(layer) * num_slots_) + array * which;
}

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCache(const KvShape& shape, int num_pages,
                                                            int num_slots) {
  std::unique_ptr<KvCodec> codec = MakeFp16Codec(shape);
  std::unique_ptr<CudaKvCache> c(new CudaKvCache());
  c->shape_ = shape;
  c->num_pages_ = num_pages;
  c->num_slots_ = num_slots;
  c->spec_.codec = codec->name();
  c->spec_.page_tokens = codec->page_tokens();
  c->spec_.residual_tokens = codec->residual_tokens();
  c->spec_.needs_pre_rope_keys = false;
  c->ring_tokens_ = c->spec_.residual_tokens + c->spec_.page_tokens;
  c->layer_page_bytes_ = codec->LayerPageBytes();
  c->ring_slot_stride_ = int64_t{2} * c->ring_tokens_ * shape.num_kv_heads * shape.head_dim;
  c->spec_.page_bytes = c->layer_page_bytes_ * shape.num_layers;
  c->spec_.slot_bytes = c->ring_slot_stride_ * sizeof(uint16_t) * shape.num_layers;
  c->spec_.fixed_bytes = 0;
  c->spec_.bytes_per_token = static_cast<double>(c->spec_.page_bytes) / c->spec_.page_tokens;
  const size_t page_total = c->spec_.page_bytes * static_cast<size_t>(num_pages);
  const size_t ring_total = c->spec_.slot_bytes * static_cast<size_t>(num_slots);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, page_total > 0 ? page_total : 1); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda kv cache: ", page_total, " bytes of pages: ", cudaGetErrorString(e)));
  }
  c->pages_ = static_cast<uint8_t*>(p);
  if (cudaError_t e = cudaMalloc(&p, ring_total > 0 ? ring_total : 1); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda kv cache: ", ring_total, " bytes of rings: ", cudaGetErrorString(e)));
  }
  c->rings_ = static_cast<uint16_t*>(p);
  return c;
}

#else  // no cuda backend in this build

CudaKvCache::~CudaKvCache() = default;
void CudaKvCache::Append(int, const KvSeqRef&, int, const float*, const float*, const float*) {
  std::abort();
}
void CudaKvCache::Attend(int, const KvSeqRef&, int, const float*, float*) { std::abort(); }
uint16_t* CudaKvCache::ring(int, int) const { return nullptr; }

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCache(const KvShape&, int, int) {
  return absl::UnimplementedError(
      "this vqserve was built without the cuda backend (nvcc was not found at configure time)");
}

#endif

}  // namespace vqserve
