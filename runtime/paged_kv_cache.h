#ifndef VQSERVE_RUNTIME_PAGED_KV_CACHE_H_
#define VQSERVE_RUNTIME_PAGED_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/kv_cache.h"
#include "runtime/kv_codec.h"

namespace vqserve {

// paged kv storage over any KvCodec: num_pages coded pages (all layers each) plus, per slot
// and layer, an fp16 ring of residual_tokens + page_tokens tokens holding k after rope, v and,
// when the codec needs them, k before rope. the oldest page of a ring is encoded into the
// sequence's block as soon as the ring holds residual + page tokens (CodedTokens()).
class PagedKvCache : public KvCache {
 public:
  PagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages, int num_slots);

  const KvCacheSpec& spec() const override { return spec_; }
  const KvShape& shape() const override { return codec_->shape(); }
  int num_pages() const override { return num_pages_; }
  int num_slots() const override { return num_slots_; }
  const KvCodec& codec() const { return *codec_; }

  // bytes held: pages, rings and codec constants (exactly what was allocated).
  size_t page_memory_bytes() const { return spec_.page_bytes * num_pages_; }
  size_t slot_memory_bytes() const { return spec_.slot_bytes * num_slots_; }
  size_t total_bytes() const;
  // one layer's slice of page `page_id` (tests and tools).
  const uint8_t* page_slice(int page_id, int layer) const;

  void Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
              const float* k_rope, const float* v) override;
  void Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) override;

 private:
  // fp16 ring rows of (slot, layer): which = 0 k after rope, 1 v, 2 k before rope.
  uint16_t* Ring(int slot, int layer, int which);
  // encodes the page that starts at `first_pos` from the ring into the sequence's block.
  void FlushPage(int layer, const KvSeqRef& seq, int first_pos);

  std::unique_ptr<KvCodec> codec_;
  KvCacheSpec spec_;
  int num_pages_;
  int num_slots_;
  int ring_tokens_;       // residual_tokens + page_tokens
  int ring_arrays_;       // 2, or 3 with pre-rope keys
  size_t layer_ring_elems_;  // fp16 elements of one layer's ring, all arrays
  std::unique_ptr<uint8_t[]> pages_;
  std::unique_ptr<uint16_t[]> rings_;
};

// a paged cache of `num_pages` pages and `num_slots` residual rings for `codec`.
std::unique_ptr<PagedKvCache> MakePagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages,
                                               int num_slots);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_PAGED_KV_CACHE_H_
