// the engine thread: admits validated requests into the scheduler and runs the step loop
// (schedule -> forward -> sample -> postprocess -> stream), one kv cache per codec pool.
#ifndef VQSERVE_SERVER_ENGINE_H_
#define VQSERVE_SERVER_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/vqserve.pb.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/model/llama_model.h"
#include "scheduler/scheduler.h"
#include "server/request_stream.h"
#include "server/request_validation.h"
#include "server/server_metrics.h"

namespace vqserve {

struct EngineOptions {
  SchedulerConfig scheduler;
  std::string default_codec;    // must be one of the caches' codecs
  int default_max_tokens = 256;
  size_t kv_memory_bytes = 0;   // the budget the pools were sized from (reported only)
  // the memory every cache shares (MakeKvPools); num_chunks 0: each cache's own pages and
  // slots (tests that build caches by hand).
  SharedKvMemory shared_memory;
  std::string device = "cpu";
};

// when a request must end (DEADLINE_EXCEEDED, its pages freed at the next step) and what set
// the time (named in the status message).
struct Deadline {
  absl::Time at = absl::InfiniteFuture();
  std::string source;
};

// a consistent view of the engine for health checks, tests and GetModelInfo.
struct EngineSnapshot {
  struct Pool {
    std::string codec;
    int pages_free = 0;
    int pages_total = 0;
    int slots_free = 0;
    int slots_total = 0;
    int64_t memory_bytes = 0;  // of the shared memory, lent to this codec
    int num_sequences = 0;     // holding kv
    int pages_in_use = 0;      // held by sequences (not only by the prefix cache)
    int slots_in_use = 0;      // residual rings of sequences
    int64_t cached_bytes = 0;  // held only by the prefix cache (reclaimable)
  };
  std::vector<Pool> pools;
  int64_t memory_total = 0;  // shared memory bytes (0 without)
  int64_t memory_free = 0;
  int64_t memory_in_use = 0;  // bytes sequences hold
  int num_active = 0;     // submitted and not finished
  int num_waiting = 0;
  int num_running = 0;
  int64_t num_preemptions = 0;
  int64_t steps = 0;
};

class Engine {
 public:
  // `model` must outlive the engine; `caches` hold one codec each (pool i = caches[i]);
  // `metrics` may be null.
  Engine(LlamaModel* model, std::vector<std::unique_ptr<KvCache>> caches,
         const EngineOptions& options, ServerMetrics* metrics);
  ~Engine();  // aborts everything and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void Start();
  // validates and tokenizes; INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED past the
  // queue bound, UNAVAILABLE while draining, ALREADY_EXISTS for a request_id in use. past
  // `deadline` the request ends with DEADLINE_EXCEEDED wherever it is (queued or running).
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(const v1::GenerateRequest& request,
                                                        const Deadline& deadline = {});
  // aborts by request_id (pages freed at the engine's next step); false when unknown.
  bool Abort(const std::string& request_id);
  // aborts by engine id (client gone).
  void Cancel(int64_t id);
  // stops admission (Submit answers UNAVAILABLE) for a drain.
  void StopAdmission();
  // false once StopAdmission was called.
  bool admitting() const;
  // aborts every request in flight.
  void AbortAll();
  // stops the loop after aborting everything; idempotent.
  void Stop();

  EngineSnapshot Snapshot() const;
  v1::ModelInfo ModelInfo() const;
  const RequestLimits& limits() const { return limits_; }
  const Tokenizer& tokenizer() const { return model_->tokenizer(); }

 private:
  struct Active;
  void Loop();
  void Admit(std::unique_ptr<Active> a);
  // one scheduled batch through the model; false when nothing could be scheduled.
  bool Step();
  // handles one sampled token; returns true when the request finished.
  bool HandleToken(Active& a, const SampledToken& tok, int64_t now_us);
  // ends a request: its final message, or `failure` as the call's status when not ok.
  void FinishActive(int64_t id, v1::FinishReason reason,
                    const absl::Status& failure = absl::OkStatus());
  void PublishState();

  LlamaModel* model_;
  std::vector<std::unique_ptr<KvCache>> caches_;
  EngineOptions options_;
  ServerMetrics* metrics_;
  RequestLimits limits_;
  Scheduler scheduler_;
  double fp16_bytes_per_token_ = 0;
  int64_t prefix_queries_seen_ = 0, prefix_hits_seen_ = 0;

  // engine-thread state.
  std::map<int64_t, std::unique_ptr<Active>> active_;
  std::vector<float> logits_;

  // shared state.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Active>> inbox_;
  std::vector<int64_t> aborts_;
  std::map<std::string, int64_t> by_request_id_;
  int64_t next_id_ = 1;
  bool draining_ = false;
  bool stopping_ = false;
  bool abort_all_ = false;
  EngineSnapshot snapshot_;
  std::thread thread_;
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_ENGINE_H_
