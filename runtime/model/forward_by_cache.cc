#include "runtime/model/forward_by_cache.h"

#include <algorithm>
#include <cstddef>

namespace vqserve {

void ForwardByCache(
    std::span<const ForwardSeq> batch, int vocab_size, std::vector<float>* logits,
    const std::function<void(std::span<const ForwardSeq>, std::vector<float>*)>& one_cache) {
  std::vector<const KvCache*> caches;
  for (const ForwardSeq& s : batch) {
    if (!s.tokens.empty() && std::find(caches.begin(), caches.end(), s.cache) == caches.end()) {
      caches.push_back(s.cache);
    }
  }
  if (caches.size() <= 1) return one_cache(batch, logits);
  const size_t vocab = static_cast<size_t>(vocab_size);
  std::vector<size_t> first_row(batch.size());
  size_t rows = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSeq& s = batch[i];
    first_row[i] = rows;
    rows += static_cast<size_t>(LogitRows(s));
  }
  const size_t base = logits->size();
  logits->resize(base + rows * vocab);
  std::vector<ForwardSeq> sub;
  std::vector<size_t> which;
  std::vector<float> part;
  for (const KvCache* cache : caches) {
    sub.clear();
    which.clear();
    part.clear();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].tokens.empty() || batch[i].cache != cache) continue;
      sub.push_back(batch[i]);
      which.push_back(i);
    }
    one_cache(sub, &part);
    size_t at = 0;
    for (size_t i : which) {
      const size_t next = i + 1 < batch.size() ? first_row[i + 1] : rows;
      const size_t count = (next - first_row[i]) * vocab;
      std::copy(part.begin() + at, part.begin() + at + count,
                logits->begin() + base + first_row[i] * vocab);
      at += count;
    }
  }
}

}  // namespace vqserve
