#ifndef VQSERVE_RUNTIME_KV_PAGED_KV_CACHE_H_
#define VQSERVE_RUNTIME_KV_PAGED_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve {

// paged kv storage over any KvCodec: num_pages coded pages (all layers each) plus, per slot
// and layer, an fp16 ring of residual_tokens + page_tokens tokens holding k after rope, v and,
// when the codec needs them, k before rope. the oldest page of a ring is encoded into the
// sequence's block as soon as the ring holds residual + page tokens (CodedTokens()).
// with sink_tokens > 0 the first sink_tokens tokens also stay fp16 in a per-slot buffer (their
// pages are skipped: attention sinks cost the model most when coded).
// a step of n tokens attends as n single-token decode steps would: the query at position q sees
// the tokens below CodedTokens(q + 1) as codes and the rest in fp16, so chunked prefill and
// token-by-token decoding see the same cache. Attend must follow the Append of the same step
// (same sequence and layer) on the same thread, which keeps the step's fp16 window; it may
// attend a suffix of the step's queries.
class PagedKvCache : public HostKvCache {
 public:
  // sink_tokens: rounded down to whole pages; ignored for codecs without a residual window.
  PagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages, int num_slots, int sink_tokens = 0);
  // a cache whose pages and slots live in `memory` (shared with other codecs' caches): as many
  // page and slot ids as fit in it; which ids are in use is the scheduler's business.
  PagedKvCache(std::unique_ptr<KvCodec> codec, std::shared_ptr<const KvMemory> memory,
               int sink_tokens = 0);

  const KvCacheSpec& spec() const override { return spec_; }
  const KvShape& shape() const override { return codec_->shape(); }
  int num_pages() const override { return num_pages_; }
  int num_slots() const override { return num_slots_; }
  const KvCodec& codec() const { return *codec_; }

  // bytes of pages, rings and codec constants as if every id were its own (with shared memory
  // the ids overlap; the memory's bytes are what was allocated).
  size_t page_memory_bytes() const { return spec_.page_bytes * num_pages_; }
  size_t slot_memory_bytes() const { return spec_.slot_bytes * num_slots_; }
  size_t total_bytes() const;
  // one layer's slice of page `page_id` (tests and tools).
  const uint8_t* page_slice(int page_id, int layer) const;

  void Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
              const float* k_rope, const float* v) override;
  void Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) override;
  void CopySlot(int from, int to) override;

 private:
  // sets the spec from the codec; num_pages_ and num_slots_ are set after.
  void InitSpec(int sink_tokens);
  // fp16 ring rows of (slot, layer): which = 0 k after rope, 1 v, 2 k before rope. a slot's
  // bytes: (layer, which, ring_tokens, H, D) rings, then (layer, k|v, sink_tokens, H, D) sinks.
  uint16_t* Ring(int slot, int layer, int which);
  // fp16 sink rows of (slot, layer): which = 0 k after rope, 1 v.
  uint16_t* Sink(int slot, int layer, int which);
  // encodes the page that starts at `first_pos` from the ring into the sequence's block.
  void FlushPage(int layer, const KvSeqRef& seq, int first_pos);

  // the fp16 tokens of the latest Append on this thread, positions [first, end), fp32.
  struct StepWindow {
    const PagedKvCache* owner = nullptr;
    int slot = -1, layer = -1, first = 0, end = 0;
    std::vector<float> k, v;  // (end - first, num_kv_heads, head_dim)
  };
  static thread_local StepWindow window_;

  std::unique_ptr<KvCodec> codec_;
  KvCacheSpec spec_;
  int num_pages_;
  int num_slots_;
  int ring_tokens_;       // residual_tokens + page_tokens
  int ring_arrays_;       // 2, or 3 with pre-rope keys
  size_t layer_ring_elems_;  // fp16 elements of one layer's ring, all arrays
  std::unique_ptr<uint8_t[]> own_pages_, own_slots_;  // without shared memory
  std::shared_ptr<const KvMemory> memory_;            // with it
  uint8_t* pages_ = nullptr;  // page i at pages_ + i * page_bytes
  uint8_t* slots_ = nullptr;  // slot i at slots_ + i * slot_bytes
};

// a paged cache of `num_pages` pages and `num_slots` residual rings for `codec`.
std::unique_ptr<PagedKvCache> MakePagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages,
                                               int num_slots, int sink_tokens = 0);
// a paged cache over shared host memory.
std::unique_ptr<PagedKvCache> MakePagedKvCache(std::unique_ptr<KvCodec> codec,
                                               std::shared_ptr<const KvMemory> memory,
                                               int sink_tokens = 0);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_PAGED_KV_CACHE_H_
