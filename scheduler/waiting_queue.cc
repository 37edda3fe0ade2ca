#include "scheduler/waiting_queue.h"

#include "scheduler/check.h"

namespace vqserve {

void WaitingQueue::Insert(Sequence* seq, int64_t ticket) {
  VQ_SCHED_CHECK(seq != nullptr && !by_id_.contains(seq->id));
  Entry e{-seq->priority, ticket, seq};
  entries_.insert(e);
  by_id_.emplace(seq->id, e);
}

void WaitingQueue::PushBack(Sequence* seq) { Insert(seq, next_back_++); }

void WaitingQueue::PushFront(Sequence* seq) { Insert(seq, next_front_--); }

bool WaitingQueue::Remove(int64_t id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  entries_.erase(it->second);
  by_id_.erase(it);
  return true;
}

}  // namespace vqserve
