#ifndef VQSERVE_SCHEDULER_WAITING_QUEUE_H_
#define VQSERVE_SCHEDULER_WAITING_QUEUE_H_

#include <cstdint>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "scheduler/sequence.h"

namespace vqserve {

// sequences waiting for admission, in service order: higher priority first, then FIFO;
// PushFront puts a sequence ahead of every queued one of its priority (preempted work).
class WaitingQueue {
 public:
  struct Entry {
    int neg_priority;  // -priority, so that the set's order is service order
    int64_t ticket;    // fifo position; front pushes get decreasing negative tickets
    Sequence* seq;
    bool operator<(const Entry& o) const {
      if (neg_priority != o.neg_priority) return neg_priority < o.neg_priority;
      return ticket < o.ticket;
    }
  };
  using const_iterator = std::set<Entry>::const_iterator;

  // queues behind every sequence of the same or higher priority.
  void PushBack(Sequence* seq);
  // queues ahead of every sequence of the same priority (and behind higher ones).
  void PushFront(Sequence* seq);
  // removes the sequence with this id; false when it is not queued.
  bool Remove(int64_t id);
  bool Contains(int64_t id) const { return by_id_.contains(id); }

  int size() const { return static_cast<int>(entries_.size()); }
  bool empty() const { return entries_.empty(); }
  // service order; iterators stay valid until the next Push or Remove.
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

 private:
  void Insert(Sequence* seq, int64_t ticket);

  std::set<Entry> entries_;
  absl::flat_hash_map<int64_t, Entry> by_id_;
  int64_t next_back_ = 0;
  int64_t next_front_ = -1;
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_WAITING_QUEUE_H_
