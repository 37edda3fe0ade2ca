// builds the paged kv caches of the served codecs over one kv memory budget that they share:
// host memory (PagedKvCache) or wherever the makers put it (CudaKvCache for --device cuda).
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
#include "scheduler/scheduler.h"

namespace vqserve {

// makes a codec by name (e.g. from the codec factory with the deployment's codebooks).
using CodecMaker = std::function<absl::StatusOr<std::unique_ptr<KvCodec>>(const std::string&)>;

// makes the cache of codec `name` with `num_pages` pages and `num_slots` residual rings of its
// own (a one-page probe gives a codec's sizes; tools and tests size caches this way).
using KvCacheMaker = std::function<absl::StatusOr<std::unique_ptr<KvCache>>(
    const std::string& name, int num_pages, int num_slots)>;

// what the shared pools are made with: a probe, the shared memory, a cache over it.
struct KvCacheMakers {
  KvCacheMaker probe;
  std::function<absl::StatusOr<std::shared_ptr<KvMemory>>(size_t bytes)> memory;
  std::function<absl::StatusOr<std::unique_ptr<KvCache>>(const std::string& name,
                                                         std::shared_ptr<const KvMemory>)>
      over;
};

// host caches (PagedKvCache) over the codecs of `make`, each keeping its first `sink_tokens`
// tokens in fp16 (the attention sink; PagedKvCache rounds it to pages).
KvCacheMaker HostKvCacheMaker(CodecMaker make, int sink_tokens = 0);
KvCacheMakers HostKvCacheMakers(CodecMaker make, int sink_tokens = 0);

// the caches of every served codec over one memory, and how the scheduler lends it.
struct KvPools {
  std::vector<std::unique_ptr<KvCache>> caches;  // pool i = caches[i]
  SharedKvMemory memory;
  size_t fixed_bytes = 0;  // codebooks and other per-codec constants, outside the memory
};

// the bytes one chunk of the shared memory has for these specs: twice the largest residual
// ring (with its sink) and at least four of the largest pages, rounded up to 4 KiB.
size_t KvChunkBytes(const std::vector<KvCacheSpec>& specs);

// one cache per codec over one memory of `kv_memory_bytes` less the codecs' constants, cut
// into chunks of KvChunkBytes: any codec's pages and residual rings may use any free chunk
// (the scheduler lends them on admission). fails when the budget holds fewer than two chunks
// (one for a sequence's ring, one for its pages).
absl::StatusOr<KvPools> MakeKvPools(const std::vector<std::string>& codecs,
                                    const KvCacheMakers& make, size_t kv_memory_bytes);

}  // namespace vqserve

#endif  // VQSERVE_SERVER_KV_POOLS_H_
