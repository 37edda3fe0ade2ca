#include "server/kv_pools.h"

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

absl::StatusOr<std::vector<std::unique_ptr<KvCache>>> MakeKvPools(
    const std::vector<std::string>& codecs, const CodecMaker& make, size_t kv_memory_bytes,
    int num_slots, int min_pages) {
  return MakeKvPools(codecs, HostKvCacheMaker(make), kv_memory_bytes, num_slots, min_pages);
}

absl::StatusOr<std::vector<std::unique_ptr<KvCache>>> MakeKvPools(
    const std::vector<std::string>& codecs, const KvCacheMaker& make, size_t kv_memory_bytes,
    int num_slots, int min_pages) {
  if (codecs.empty()) return absl::InvalidArgumentError("no kv codec enabled");
  const size_t share = kv_memory_bytes / codecs.size();
  std::vector<std::unique_ptr<KvCache>> pools;
  for (const std::string& name : codecs) {
    // a one-page probe gives the exact page and ring sizes of this codec.
    absl::StatusOr<std::unique_ptr<KvCache>> probe = make(name, 1, 1);
    if (!probe.ok()) return probe.status();
    const KvCacheSpec spec = (*probe)->spec();
    probe->reset();
    const size_t fixed = spec.fixed_bytes + spec.slot_bytes * num_slots;
    if (share < fixed + spec.page_bytes * min_pages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kv memory: ", share, " bytes for codec ", name, " cannot hold ", num_slots,
          " residual rings (", spec.slot_bytes, " bytes each) and ", min_pages, " pages (",
          spec.page_bytes, " bytes each); raise --kv-memory or lower --max-num-seqs"));
    }
    const int num_pages = static_cast<int>((share - fixed) / spec.page_bytes);
    absl::StatusOr<std::unique_ptr<KvCache>> cache = make(name, num_pages, num_slots);
    if (!cache.ok()) return cache.status();
    pools.push_back(std::move(*cache));
  }
  return pools;
}

}  // namespace vqserve
