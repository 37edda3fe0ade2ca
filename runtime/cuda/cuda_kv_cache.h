#ifndef VQSERVE_RUNTIME_CUDA_CUDA_KV_CACHE_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_KV_CACHE_H_

// the kv cache of the cuda model: pages ("fp16", "kivi-k2v2" / "kivi-k4v4", "vecinfer-kXvY"
// of any width, or "commvq-2" / "commvq-1", of docs/kv_formats.md), fp16 residual rings (for
// commvq also of the pre-rope keys its flushes code) and, for the coded formats, the
// fp16 attention sink of each slot in device memory, with the same spec, flush policy and page
// metadata as a PagedKvCache over the same codec and sink. the cuda model appends and attends on
// the device itself (its codec step: cuda_codec_step.h).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kv_page_format.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/commvq_codebooks.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/vecinfer_codec.h"

namespace vqserve {

// a vecinfer cache's constants in device memory, all layers, laid out as VecInferCodebooks:
// lambda (layers, H, D); k_centroids (layers, g, D / k_sub_dim, 2^k_code_bits, k_sub_dim); v
// likewise.
struct CudaVecInferConstants {
  const float* lambda = nullptr;
  const float* k_centroids = nullptr;
  const float* v_centroids = nullptr;
  int k_sub_dim = 4;  // -pca keys: the stand-in for k_codes in the kernels' shape checks
  int v_sub_dim = 4;
  int k_code_bits = 8;  // 8 or 12
  int v_code_bits = 8;
  int k_codes = 0;  // key codes a token and kv head (D / k_sub_dim, or -pca's Mk)
  bool per_head = false;  // g = num_kv_heads, else 1
  bool hadamard = true;
  // fp16 code-major copies of v_centroids and k_centroids, (layers, g, 256, D / sub, sub)
  // (kernels/cuda/common/vecinfer_half_books.h), for the shapes of the tensor-core decode kernel (8-bit codes;
  // D 128 or 64 with 4-dim sub-vectors, or 8-dim values with 4- or 8-dim keys); null
  // otherwise. element offsets as the fp32 books'.
  // the decode kernel's lut is fp16 either way; fp16 key books change its output by ~2e-5
  // relative (decode_check, v8hk) and halve the bytes every block loads to build it.
  const uint16_t* v_centroids_f16 = nullptr;
  const uint16_t* k_centroids_f16 = nullptr;
  // -pca keys (VecInferOptions::key_pca; null otherwise), per (layer, kv head) as
  // kernels/cuda/kv_step/vecinfer_kv_step.h VecInferLayerCodec takes them: k_transform and
  // k_inverse_t (D, D), k_dims (k_codes), k_dim_map (D); k_centroids are then per kv head
  // (layers, H, D << 8) and hold the centroids plus (mean T); no fp16 key books (the decode
  // kernel's lut comes from LaunchVecInferPcaLut).
  const float* k_transform = nullptr;
  const float* k_inverse_t = nullptr;
  const int32_t* k_dims = nullptr;
  const int32_t* k_dim_map = nullptr;
};

// a commvq cache's constants in device memory, all layers, the rounds in use only:
// key_books (layers, H, key_rounds, 64, D / 2, 2), value_books (layers, H, value_rounds, D / 8,
// 256, 8) fp32; rope_freqs (D / 2) theta_j = float32(theta^(-2j/D)) of the books' rope base.
struct CudaCommVqConstants {
  const float* key_books = nullptr;
  const float* value_books = nullptr;
  const float* rope_freqs = nullptr;
  int key_rounds = 0;
  int value_rounds = 0;
  float rope_theta = 10000.0f;
  int64_t key_head_stride = 0;    // floats: key_rounds * 64 * D
  int64_t value_head_stride = 0;  // floats: value_rounds * 256 * D
};

class CudaKvCache : public KvCache {
 public:
  ~CudaKvCache() override;
  CudaKvCache(const CudaKvCache&) = delete;
  CudaKvCache& operator=(const CudaKvCache&) = delete;

  const KvCacheSpec& spec() const override { return spec_; }
  const KvShape& shape() const override { return shape_; }
  int num_pages() const override { return num_pages_; }
  int num_slots() const override { return num_slots_; }

  KvDevice device() const override { return KvDevice::kCuda; }
  // device-to-device, after every queued kernel (cudaDeviceSynchronize before and after).
  void CopySlot(int from, int to) override;

  // device layout: page j's slice of `layer` at pages() + j * spec().page_bytes +
  // layer * layer_page_bytes(); ring rows of (layer, slot) at ring(layer, which) +
  // slot * ring_slot_stride() (which 0: k after rope, 1: v, 2: k before rope for codecs that
  // code pre-rope keys (commvq; null otherwise)), ring_tokens() rows of H * D;
  // sink rows of (layer, slot) at sink(layer, which) + slot * sink_slot_stride(),
  // spec().sink_tokens rows of H * D (null when the sink is 0). slot i's rings and sinks are
  // the spec().slot_bytes at byte i * slot_bytes of the slot memory, (layer, which, ring, H, D)
  // then (layer, k|v, sink, H, D), so the two strides are slot_bytes / 2.
  // moves the pages and slots into `memory` (device memory shared with other codecs' caches:
  // page i at base + i * page_bytes, slot i at base + i * slot_bytes) and frees its own.
  absl::Status UseMemory(std::shared_ptr<const KvMemory> memory);
  uint8_t* pages() const { return pages_; }
  size_t layer_page_bytes() const { return layer_page_bytes_; }
  uint16_t* ring(int layer, int which) const;
  int64_t ring_slot_stride() const { return ring_slot_stride_; }
  int ring_tokens() const { return ring_tokens_; }
  uint16_t* sink(int layer, int which) const;
  int64_t sink_slot_stride() const { return sink_slot_stride_; }
  KvPageFormat format() const { return format_; }
  // kivi only: bits per code (2 or 4).
  int kivi_bits() const { return kivi_bits_; }
  // vecinfer only.
  const CudaVecInferConstants& vecinfer() const { return vecinfer_; }
  // commvq only.
  const CudaCommVqConstants& commvq() const { return commvq_; }

 private:
  friend absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCache(const KvShape&, int, int);
  friend absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaVecInferKvCache(
      std::shared_ptr<const VecInferCodebooks>, int, int, int);
  friend absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKiviKvCache(const KvShape&, int,
                                                                          int, int, int);
  friend absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaCommVqKvCache(
      std::shared_ptr<const CommVqCodebooks>, int, int, int, int, int);
  CudaKvCache() = default;
  // sizes and spec of a cache holding `codec`'s pages (format_ set by the caller); the sink is
  // rounded down to pages as PagedKvCache does (0 for codecs without a residual ring), and the
  // ring holds pre-rope keys too when the codec needs them.
  // uploads `floats` to a new device array kept in constants_ (one per cache).
  absl::Status UploadConstants(const std::vector<float>& floats);
  void InitSpec(const KvCodec& codec, const KvShape& shape, int num_pages, int num_slots,
                int sink_tokens = 0);
  // allocates pages, rings and sinks for spec_ (page_bytes, slot_bytes) and the counts.
  absl::Status Allocate();

  KvPageFormat format_ = KvPageFormat::kFp16;
  int kivi_bits_ = 0;
  CudaVecInferConstants vecinfer_;
  CudaCommVqConstants commvq_;
  float* constants_ = nullptr;  // device: vecinfer lambda, k, v centroids; commvq books, freqs
  uint16_t* half_books_ = nullptr;  // device: vecinfer fp16 value then key books (*_centroids_f16)

  KvShape shape_;
  KvCacheSpec spec_;
  int num_pages_ = 0;
  int num_slots_ = 0;
  int ring_tokens_ = 0;
  size_t layer_page_bytes_ = 0;
  int ring_arrays_ = 2;           // k, v (+ k before rope)
  int64_t ring_layer_elems_ = 0;  // fp16 elements: ring_arrays x ring_tokens x H x D
  int64_t sink_layer_elems_ = 0;  // fp16 elements: 2 x sink_tokens x H x D
  int64_t ring_slot_stride_ = 0;  // fp16 elements: slot_bytes / 2
  int64_t sink_slot_stride_ = 0;  // the same
  uint8_t* pages_ = nullptr;      // device
  uint8_t* slots_ = nullptr;      // device: slot i at i * slot_bytes (layout above)
  bool owns_ = true;              // pages_ and slots_ are its own (else memory_'s)
  std::shared_ptr<const KvMemory> memory_;
};

// an fp16 paged cache of `num_pages` pages and `num_slots` rings on the current cuda device;
// an error when this build has no cuda backend or the device memory runs out.
absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCache(const KvShape& shape, int num_pages,
                                                            int num_slots);

// a vecinfer cache over `codebooks` (any width: 4, 3, 2, 1.5 or 1 bits per element for keys
// and values; 8-bit codes with key / value sub-vectors (2,2), (4,4), (8,8) or (4,8) run the
// lut and tensor-core decode kernels, the others the generic one; -pca keys the tensor-core
// kernel's widths only: k2v2, k2v1, k1v1), keeping the first
// `sink_tokens` tokens (rounded down to pages) of each sequence in fp16.
absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaVecInferKvCache(
    std::shared_ptr<const VecInferCodebooks> codebooks, int num_pages, int num_slots,
    int sink_tokens = 0);

// a "kivi-kBvB" cache (bits 2 or 4) with the sink as above.
absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKiviKvCache(const KvShape& shape, int bits,
                                                                int num_pages, int num_slots,
                                                                int sink_tokens = 0);

// a "commvq-2" / "commvq-1" cache over the first key_rounds / value_rounds rounds of `books`
// (CommVqOptionsForName; CheckCommVqCodec must pass), the books in device memory, the sink as
// above.
absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaCommVqKvCache(
    std::shared_ptr<const CommVqCodebooks> books, int key_rounds, int value_rounds,
    int num_pages, int num_slots, int sink_tokens = 0);

// the cache of codec `name` for `shape` (codebooks: the artifact calibrated for it, or null),
// with the attention sink of PagedKvCache (`sink_tokens` rounded down to pages; fp16 has none).
absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCacheForCodec(
    const std::string& name, const KvShape& shape, const CodebookFile* codebooks, int num_pages,
    int num_slots, int sink_tokens = 0);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_KV_CACHE_H_
