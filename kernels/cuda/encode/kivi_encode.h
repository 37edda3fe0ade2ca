#ifndef VQSERVE_KERNELS_CUDA_ENCODE_KIVI_ENCODE_H_
#define VQSERVE_KERNELS_CUDA_ENCODE_KIVI_ENCODE_H_

// the flush of one page to "kivi-kBvB" codes on the gpu (docs/kv_formats.md), bit for bit what
// KiviCodec::EncodePage writes: keys quantized per channel over the page's 32 tokens, values per
// token in groups of 32 channels; asymmetric min/max with fp16 min and scale = (max - min) /
// (2^B - 1), code = round-half-away((x - min) / scale) clamped to [0, 2^B - 1] (0 when the scale
// is 0), packed little-endian.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace vqserve::cuda {

struct KiviEncodeParams {
  const float* k = nullptr;  // (32, num_kv_heads, head_dim) keys after rope, fp16-rounded
  const float* v = nullptr;  // (32, num_kv_heads, head_dim)
  int bits = 2;              // 2 or 4
  int num_kv_heads = 0;
  int head_dim = 0;          // a multiple of 32
  // the page's layer slice: Kmin[H][D], Kscale[H][D], Vmin[H][32][D/32], Vscale[H][32][D/32]
  // fp16, K codes [H][D][32], V codes [H][32][D]; every byte is written.
  uint8_t* dst = nullptr;
};

// bytes of one layer's slice of a kivi page (KiviCodec::LayerPageBytes).
int64_t KiviLayerPageBytes(int bits, int num_kv_heads, int head_dim);

// encodes one page (32 tokens); empty string on success.
std::string LaunchKiviEncodePage(const KiviEncodeParams& params, cudaStream_t stream);

// encodes `count` pages: page i's rows at params.k / params.v + i * 32 * num_kv_heads * head_dim
// floats, its layer slice at params.dst + page_ids[i] * page_bytes. page_ids is in device
// memory and read by the kernel, so a captured cuda graph replays with the ids of its step.
std::string LaunchKiviEncodePages(const KiviEncodeParams& params, const int32_t* page_ids,
                                  int64_t page_bytes, int count, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_ENCODE_KIVI_ENCODE_H_
