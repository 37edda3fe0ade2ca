#ifndef VQSERVE_RUNTIME_KV_KV_CACHE_H_
#define VQSERVE_RUNTIME_KV_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/kv/page_flush.h"

namespace vqserve {

// shape of the kv cache of one model.
struct KvShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int num_heads = 0;  // query heads (a multiple of num_kv_heads)
  int head_dim = 0;
};

// what a cache holds per page and per sequence; fixed for its lifetime.
struct KvCacheSpec {
  std::string codec;            // "fp16", "kivi-k2v2", "vecinfer-k2v2", "commvq-2", ...
  int page_tokens = 32;         // tokens per page (a flush moves one page of tokens)
  int residual_tokens = 128;    // most recent tokens kept in fp16 (0 for fp16 itself)
  // oldest tokens kept in fp16 for the sequence's whole life (the attention sinks), a multiple
  // of page_tokens; their pages stay reserved in the block table but are never encoded or read.
  int sink_tokens = 0;
  size_t page_bytes = 0;        // bytes of one page, all layers, k and v
  size_t slot_bytes = 0;        // bytes of one sequence's fp16 residual ring, all layers
  size_t fixed_bytes = 0;       // codebooks and other per-cache constants
  double bytes_per_token = 0;   // page_bytes / page_tokens (the coded cost per token)
  bool needs_pre_rope_keys = false;
};

// tokens of a sequence of `num_tokens` tokens that live in pages; the rest are in the residual
// ring (the flush rule of page_flush.h).
inline int CodedTokens(const KvCacheSpec& s, int num_tokens) {
  return CodedTokenCount(num_tokens, s.residual_tokens, s.page_tokens);
}
// pages a sequence of `num_tokens` tokens needs.
inline int PagesForTokens(const KvCacheSpec& s, int num_tokens) {
  return CodedTokens(s, num_tokens) / s.page_tokens;
}

// the cache state of one sequence, as the scheduler hands it to the runtime.
struct KvSeqRef {
  int slot = -1;                         // residual ring owned by the sequence
  const int32_t* block_table = nullptr;  // physical page ids, logical order
  int num_blocks = 0;                    // >= PagesForTokens(num_cached + n) for this step
  int num_cached = 0;                    // tokens already in the cache before this step
};

// where a cache's pages live: the model of the same device appends to and attends over them.
enum class KvDevice { kHost, kCuda };

// memory shared by the caches of several codecs (one kv budget, lent by the scheduler in
// chunks): a cache over it keeps page i at base + i * page_bytes and the residual ring (with
// the sink) of slot i at base + i * slot_bytes; the scheduler never lends overlapping units.
struct KvMemory {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  KvDevice device = KvDevice::kHost;
  std::shared_ptr<void> owner;  // frees the bytes with the last cache that uses them
};

// `bytes` of host memory for caches to share.
std::shared_ptr<KvMemory> MakeHostKvMemory(size_t bytes);

// paged kv storage of one codec for all sequences: what the scheduler and the server see.
class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual const KvCacheSpec& spec() const = 0;
  virtual const KvShape& shape() const = 0;
  virtual int num_pages() const = 0;
  virtual int num_slots() const = 0;
  virtual KvDevice device() const = 0;
  // copies slot `from`'s residual ring and sink into slot `to` (whole slots; a prefix-cache
  // snapshot and its restore). blocks until done.
  virtual void CopySlot(int from, int to) = 0;
};

// a cache in host memory. the cpu model calls, per layer and step, Append for the step's new
// tokens and then Attend for their queries.
class HostKvCache : public KvCache {
 public:
  KvDevice device() const final { return KvDevice::kHost; }

  // stores n new tokens at positions num_cached..num_cached+n-1 of `layer`, flushing whole pages
  // from the residual ring to codes as the policy above says.
  // k_pre_rope, k_rope, v: (n, num_kv_heads, head_dim) fp32; k_pre_rope may be null when
  // spec().needs_pre_rope_keys is false.
  virtual void Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
                      const float* k_rope, const float* v) = 0;

  // causal attention of n queries at positions num_cached..num_cached+n-1 (after Append of
  // the same step) over every cached token at or before each position.
  // q: (n, num_heads, head_dim) fp32 after rope; out: (n, num_heads, head_dim).
  // scale = 1/sqrt(head_dim). codes are read directly; no dequantized k/v buffer is built.
  virtual void Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) = 0;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_KV_CACHE_H_
