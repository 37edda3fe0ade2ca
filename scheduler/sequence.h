#ifndef VQSERVE_SCHEDULER_SEQUENCE_H_
#define VQSERVE_SCHEDULER_SEQUENCE_H_

#include <cstdint>
#include <vector>

namespace vqserve {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

// one request's tokens and kv bookkeeping as the scheduler sees it. the scheduler knows
// nothing of kernels: a sequence owns only its block table and residual slot.
struct Sequence {
  int64_t id = 0;
  int priority = 0;        // larger is more important
  int pool = 0;            // index of the kv page pool (one per codec) it uses
  int64_t arrival_us = 0;  // submit time; newest is preempted first among equal priority
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  int num_prompt_tokens = 0;
  int max_new_tokens = 0;
  int num_computed = 0;         // tokens whose kv is in the cache
  std::vector<int32_t> block_table;
  int slot = -1;                // residual ring index in its pool, -1 when none held
  SequenceStatus status = SequenceStatus::kWaiting;
  int num_preemptions = 0;
  // prefix caching: BlockHash of each full page of tokens (filled as needed), the blocks of its
  // table already offered to the prefix cache, and the tokens its latest admission took from it.
  std::vector<uint64_t> block_hashes;
  int prefix_blocks = 0;
  int num_cached_tokens = 0;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_generated() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_SEQUENCE_H_
