#include "server/kv_pools.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/kv/paged_kv_cache.h"

namespace vqserve {

KvCacheMaker HostKvCacheMaker(CodecMaker make, int sink_tokens) {
  return [make = std::move(make), sink_tokens](
             const std::string& name, int num_pages,
             int num_slots) -> absl::StatusOr<std::unique_ptr<KvCache>> {
    absl::StatusOr<std::unique_ptr<KvCodec>> codec = make(name);
    if (!codec.ok()) return codec.status();
    return std::unique_ptr<KvCache>(
        MakePagedKvCache(std::move(*codec), num_pages, num_slots, sink_tokens));
  };
}

KvCacheMakers HostKvCacheMakers(CodecMaker make, int sink_tokens) {
  KvCacheMakers m;
  m.probe = HostKvCacheMaker(make, sink_tokens);
  m.memory = [](size_t bytes) -> absl::StatusOr<std::shared_ptr<KvMemory>> {
    return MakeHostKvMemory(bytes);
  };
  m.over = [make = std::move(make), sink_tokens](const std::string& name,
                                                 std::shared_ptr<const KvMemory> memory)
      -> absl::StatusOr<std::unique_ptr<KvCache>> {
    absl::StatusOr<std::unique_ptr<KvCodec>> codec = make(name);
    if (!codec.ok()) return codec.status();
    return std::unique_ptr<KvCache>(
        MakePagedKvCache(std::move(*codec), std::move(memory), sink_tokens));
  };
  return m;
}

size_t KvChunkBytes(const std::vector<KvCacheSpec>& specs) {
  size_t slot = 0, page = 0;
  for (const KvCacheSpec& s : specs) {
    slot = std::max(slot, s.slot_bytes);
    page = std::max(page, s.page_bytes);
  }
  const size_t bytes = std::max(2 * slot, 4 * page);
  constexpr size_t kAlign = 4096;
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

absl::StatusOr<KvPools> MakeKvPools(const std::vector<std::string>& codecs,
                                    const KvCacheMakers& make, size_t kv_memory_bytes) {
  if (codecs.empty()) return absl::InvalidArgumentError("no kv codec enabled");
  std::vector<KvCacheSpec> specs;
  size_t fixed = 0;
  for (const std::string& name : codecs) {
    // a one-page probe gives the exact page and ring sizes of this codec.
    absl::StatusOr<std::unique_ptr<KvCache>> probe = make.probe(name, 1, 1);
    if (!probe.ok()) return probe.status();
    specs.push_back((*probe)->spec());
    fixed += specs.back().fixed_bytes;
  }
  const size_t chunk = KvChunkBytes(specs);
  const size_t room = kv_memory_bytes > fixed ? kv_memory_bytes - fixed : 0;
  const int64_t chunks = static_cast<int64_t>(room / chunk);
  if (chunks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv memory: ", kv_memory_bytes, " bytes (", fixed, " of them codebooks) hold ", chunks,
        " chunks of ", chunk, " bytes; a sequence needs two (its residual ring and its pages); "
        "raise --kv-memory"));
  }
  absl::StatusOr<std::shared_ptr<KvMemory>> memory = make.memory(chunk * chunks);
  if (!memory.ok()) return memory.status();
  KvPools pools;
  pools.memory.num_chunks = static_cast<int>(chunks);
  pools.memory.chunk_bytes = chunk;
  pools.fixed_bytes = fixed;
  for (const std::string& name : codecs) {
    absl::StatusOr<std::unique_ptr<KvCache>> cache = make.over(name, *memory);
    if (!cache.ok()) return cache.status();
    pools.caches.push_back(std::move(*cache));
  }
  return pools;
}

}  // namespace vqserve
