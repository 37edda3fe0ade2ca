#include "scheduler/prefix_cache.h"

#include <algorithm>

#include "scheduler/check.h"

namespace vqserve {

uint64_t BlockHash(uint64_t parent, const int32_t* tokens, int page_tokens) {
  // fnv-1a over the parent hash and the token ids, then a final mix (splitmix64).
  uint64_t h = 1469598103934665603ull ^ parent;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(parent);
  for (int i = 0; i < page_tokens; ++i) mix(static_cast<uint32_t>(tokens[i]));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;  // 0 is the empty prefix
}

int PrefixCache::FindPage(uint64_t h, uint64_t parent, const int32_t* tokens) const {
  auto it = blocks_.find(h);
  if (it == blocks_.end() || it->second.parent != parent ||
      !std::equal(it->second.tokens.begin(), it->second.tokens.end(), tokens)) {
    return -1;
  }
  return it->second.page;
}

int PrefixCache::FindSnapshot(uint64_t h) const {
  auto it = snapshots_.find(h);
  return it == snapshots_.end() ? -1 : it->second.slot;
}

bool PrefixCache::AddPage(uint64_t h, uint64_t parent, const int32_t* tokens, int page) {
  if (blocks_.contains(h) || by_page_.contains(page)) return false;
  PageEntry& e = blocks_[h];
  e.page = page;
  e.parent = parent;
  e.tokens.assign(tokens, tokens + page_tokens_);
  e.refs = 1;
  by_page_[page] = h;
  return true;
}

bool PrefixCache::AddSnapshot(uint64_t h, int slot) {
  if (snapshots_.contains(h)) return false;
  lru_.push_back({false, h, (*clock_)++});
  snapshots_[h] = SnapshotEntry{slot, std::prev(lru_.end())};
  return true;
}

void PrefixCache::Ref(int page) {
  PageEntry& e = blocks_.at(by_page_.at(page));
  if (e.refs == 0) {
    lru_.erase(e.lru);
    --evictable_pages_;
  }
  ++e.refs;
}

void PrefixCache::Unref(int page) {
  PageEntry& e = blocks_.at(by_page_.at(page));
  VQ_SCHED_CHECK(e.refs > 0);
  if (--e.refs == 0) {
    lru_.push_back({true, by_page_.at(page), (*clock_)++});
    e.lru = std::prev(lru_.end());
    ++evictable_pages_;
  }
}

int PrefixCache::refcount(int page) const {
  auto it = by_page_.find(page);
  return it == by_page_.end() ? 0 : blocks_.at(it->second).refs;
}

void PrefixCache::PinSnapshot(uint64_t h) {
  SnapshotEntry& e = snapshots_.at(h);
  if (e.pins++ == 0) lru_.erase(e.lru);
}

void PrefixCache::UnpinSnapshot(uint64_t h) {
  auto it = snapshots_.find(h);
  if (it == snapshots_.end()) return;
  SnapshotEntry& e = it->second;
  VQ_SCHED_CHECK(e.pins > 0);
  if (--e.pins == 0) {
    lru_.push_back({false, h, (*clock_)++});
    e.lru = std::prev(lru_.end());
  }
}

uint64_t PrefixCache::oldest_tick() const {
  return lru_.empty() ? UINT64_MAX : lru_.front().tick;
}

bool PrefixCache::EvictOne(int* unit, bool* is_page) {
  if (lru_.empty()) return false;
  const Lru victim = lru_.front();
  lru_.pop_front();
  *is_page = victim.is_page;
  if (victim.is_page) {
    auto it = blocks_.find(victim.hash);
    *unit = it->second.page;
    by_page_.erase(it->second.page);
    blocks_.erase(it);
    --evictable_pages_;
  } else {
    auto it = snapshots_.find(victim.hash);
    *unit = it->second.slot;
    snapshots_.erase(it);
  }
  return true;
}

std::vector<int> PrefixCache::pages() const {
  std::vector<int> out;
  for (const auto& [page, h] : by_page_) out.push_back(page);
  return out;
}

std::vector<int> PrefixCache::snapshot_slots() const {
  std::vector<int> out;
  for (const auto& [h, e] : snapshots_) out.push_back(e.slot);
  return out;
}

}  // namespace vqserve
