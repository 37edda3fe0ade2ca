// sizes and builds the paged kv caches (one pool per codec) from a byte budget, in host memory
// (PagedKvCache) or wherever a cache maker puts them (CudaKvCache for --device cuda).
#ifndef VQSERVE_SERVER_KV_POOLS_H_
#define VQSERVE_SERVER_KV_POOLS_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve {

// makes a codec by name (e.g. from the codec factory with the deployment's codebooks).
using CodecMaker = std::function<absl::StatusOr<std::unique_ptr<KvCodec>>(const std::string&)>;

// makes the cache of codec `name` with `num_pages` pages and `num_slots` residual rings.
using KvCacheMaker = std::function<absl::StatusOr<std::unique_ptr<KvCache>>(
    const std::string& name, int num_pages, int num_slots)>;

// host caches (PagedKvCache) over the codecs of `make`, each keeping its first `sink_tokens`
// tokens in fp16 (the attention sink; PagedKvCache rounds it to pages).
KvCacheMaker HostKvCacheMaker(CodecMaker make, int sink_tokens = 0);

// one cache per codec; `kv_memory_bytes` is split evenly among them and each pool gets
// `num_slots` residual rings plus as many pages as the rest of its share holds. fails (naming
// the codec) when a share cannot hold the rings and `min_pages` pages.
absl::StatusOr<std::vector<std::unique_ptr<KvCache>>> MakeKvPools(
    const std::vector<std::string>& codecs, const CodecMaker& make, size_t kv_memory_bytes,
    int num_slots, int min_pages = 1);
// the same with caches from `make` (a one-page probe of each codec gives its sizes).
absl::StatusOr<std::vector<std::unique_ptr<KvCache>>> MakeKvPools(
    const std::vector<std::string>& codecs, const KvCacheMaker& make, size_t kv_memory_bytes,
    int num_slots, int min_pages = 1);

}  // namespace vqserve

#endif  // VQSERVE_SERVER_KV_POOLS_H_
