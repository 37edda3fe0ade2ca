#ifndef VQSERVE_RUNTIME_KV_PAGE_FLUSH_H_
#define VQSERVE_RUNTIME_KV_PAGE_FLUSH_H_

// the one page-flush rule of the paged kv cache, shared by the caches (kv_cache.h) and the
// scheduler's page allocator (header-only, no dependencies): once residual + page tokens are
// buffered, the oldest page is flushed to codes, so the newest `residual_tokens` always stay
// fp16 in the sequence's ring.

namespace vqserve {

// tokens of a sequence of `num_tokens` tokens that live in pages (a multiple of page_tokens).
inline int CodedTokenCount(int num_tokens, int residual_tokens, int page_tokens) {
  if (num_tokens < residual_tokens + page_tokens) return 0;
  return ((num_tokens - residual_tokens) / page_tokens) * page_tokens;
}

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_PAGE_FLUSH_H_
