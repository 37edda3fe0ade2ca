#ifndef VQSERVE_KERNELS_CUDA_ENCODE_COMMVQ_ENCODE_H_
#define VQSERVE_KERNELS_CUDA_ENCODE_COMMVQ_ENCODE_H_

// the flush of pages to commvq codes on the gpu (docs/kv_formats.md, "commvq-R"): per token and
// kv head the fp16 norm of the pre-rope key, greedy residual rounds over the 4096 (A, B) codes
// of the commutative key books (exact squared-l2 argmin, in the cpu codec's arithmetic order, so
// codes equal runtime/kv/commvq_codec.cc's EncodePage), residual k-means rounds over 8-dim value
// sub-vectors, packed in the page layout.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace vqserve::cuda {

struct CommVqEncodeParams {
  const float* k = nullptr;  // (pages, 32, num_kv_heads, head_dim) keys before rope (fp16-rounded)
  const float* v = nullptr;  // (pages, 32, num_kv_heads, head_dim)
  // this layer's books (runtime/kv/commvq_codebooks.h layout): keys (book rounds, 64, D / 2, 2),
  // values (book value rounds, D / 8, 256, 8) fp32; kv head h's at + h * *_head_stride floats.
  const float* key_books = nullptr;
  const float* value_books = nullptr;
  int64_t key_head_stride = 0;
  int64_t value_head_stride = 0;
  int key_rounds = 0;    // rounds coded (<= the books' rounds)
  int value_rounds = 0;
  int num_kv_heads = 0;
  int head_dim = 0;      // 64 or 128
  uint8_t* dst = nullptr;  // base of the pages' layer slices (see LaunchCommVqEncodePages)
};

// encodes `count` pages: page i's rows at params.k / params.v + i * 32 * num_kv_heads *
// head_dim floats, its layer slice at params.dst + page_ids[i] * page_bytes bytes. page_ids is
// in device memory and read by the kernels, so a captured cuda graph replays with the ids of its
// step. empty string on success.
std::string LaunchCommVqEncodePages(const CommVqEncodeParams& params, const int32_t* page_ids,
                                    int64_t page_bytes, int count, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_ENCODE_COMMVQ_ENCODE_H_
