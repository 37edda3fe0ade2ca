// every vqserve prometheus metric (prefix "vqserve:", meanings as vllm's), with the calls the
// scheduler, engine and grpc server make where the facts are born. all methods are thread-safe.
#ifndef VQSERVE_SERVER_SERVER_METRICS_H_
#define VQSERVE_SERVER_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "server/metrics_registry.h"

namespace vqserve {

// kv cache state of one codec's page pool, as the allocator knows it.
struct KvCodecState {
  std::string codec;               // e.g. "fp16", "vecinfer-2b", "commvq-1b"
  double bytes_in_use = 0;         // bytes of kv held by live sequences (codes + residual)
  double fp16_equivalent_bytes = 0;  // what the same tokens would take as fp16 k and v
  int64_t pages_free = 0;
  int64_t pages_total = 0;
  double memory_bytes = 0;         // bytes of the shared kv memory lent to this codec
};

// the phases of an engine step: schedule (the scheduler's batch), forward (the model, the
// logits copied to the host), sample, finish (the scheduler's bookkeeping, ring snapshots,
// tokens handed to the streams), publish (kv and queue state for metrics and ModelInfo), and
// step (the whole loop iteration, arrivals and aborts included).
inline constexpr std::string_view kEngineStepPhases[] = {"schedule", "forward", "sample",
                                                          "finish",   "publish", "step"};

class ServerMetrics {
 public:
  // registers every family in `registry` (which must outlive this object).
  explicit ServerMetrics(MetricsRegistry& registry);

  // --- scheduler: queue and kv state (gauges, set after each step) ---
  void SetRequestsRunning(int64_t n);
  void SetRequestsWaiting(int64_t n);
  // sets every kv gauge of this codec's pool (bytes, fp16-equivalent bytes, bytes saved,
  // compression ratio, pages free/total, all labelled {codec}) and recomputes the label-less
  // kv_cache_usage_perc = used pages / total pages over every pool reported so far.
  void SetKvState(const KvCodecState& state);
  // convenience form of the above.
  void SetKvState(std::string_view codec, double bytes_in_use, double fp16_equivalent_bytes,
                  int64_t pages_free, int64_t pages_total);
  // the shared kv memory: its bytes and those sequences hold (pages and rings; what only the
  // prefix cache holds is reclaimable and not counted); from then on kv_cache_usage_perc is
  // the fraction in use.
  void SetKvMemory(double total_bytes, double in_use_bytes);
  // prefix cache: prompt tokens looked up and found (counters), bytes cached per codec.
  void AddPrefixCache(int64_t queried_tokens, int64_t hit_tokens);
  void SetPrefixCacheBytes(std::string_view codec, double bytes);
  // info gauge cache_config_info{page_size,codec,residual} = 1 (call once per pool at start-up).
  void SetCacheConfig(int64_t page_size, std::string_view codec, int64_t residual);
  void IncPreemptions(int64_t n = 1);

  // --- engine / server: per-request latencies (seconds) ---
  void ObserveTtft(double seconds);          // submit -> first token
  void ObserveInterToken(double seconds);    // between consecutive tokens of one request
  void ObserveE2e(double seconds);           // submit -> final message
  void ObserveQueueTime(double seconds);     // submit -> first scheduled
  // --- engine: where a step's time goes (seconds, by phase: kEngineStepPhases) ---
  void ObserveEngineStep(std::string_view phase, double seconds);

  // --- token counters ---
  void AddPromptTokens(int64_t n);
  void AddGenerationTokens(int64_t n);

  // --- request outcomes ---
  // finished_reason: "length", "stop", "eos", "abort".
  void IncSuccess(std::string_view finished_reason);
  // code: grpc status code name, e.g. "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED".
  void IncError(std::string_view code);

  // raw families, for tests and anything not covered above.
  Family<Gauge>& requests_running() { return *requests_running_; }
  Family<Gauge>& requests_waiting() { return *requests_waiting_; }
  Family<Gauge>& kv_cache_usage_perc() { return *kv_cache_usage_perc_; }
  Family<Gauge>& kv_cache_bytes() { return *kv_cache_bytes_; }
  Family<Gauge>& kv_cache_fp16_equivalent_bytes() { return *kv_cache_fp16_equivalent_bytes_; }
  Family<Gauge>& kv_cache_bytes_saved() { return *kv_cache_bytes_saved_; }
  Family<Gauge>& kv_compression_ratio() { return *kv_compression_ratio_; }
  Family<Gauge>& kv_pages_free() { return *kv_pages_free_; }
  Family<Gauge>& kv_pages_total() { return *kv_pages_total_; }
  Family<Gauge>& kv_memory_bytes() { return *kv_memory_bytes_; }
  Family<Gauge>& kv_memory_used_bytes() { return *kv_memory_used_bytes_; }
  Family<Counter>& prefix_cache_queries_total() { return *prefix_queries_; }
  Family<Counter>& prefix_cache_hits_total() { return *prefix_hits_; }
  Family<Gauge>& prefix_cache_bytes() { return *prefix_bytes_; }
  Family<Gauge>& cache_config_info() { return *cache_config_info_; }
  Family<Histogram>& time_to_first_token_seconds() { return *ttft_; }
  Family<Histogram>& inter_token_latency_seconds() { return *itl_; }
  Family<Histogram>& e2e_request_latency_seconds() { return *e2e_; }
  Family<Histogram>& request_queue_time_seconds() { return *queue_time_; }
  Family<Histogram>& engine_step_seconds() { return *engine_step_; }
  Family<Counter>& prompt_tokens_total() { return *prompt_tokens_; }
  Family<Counter>& generation_tokens_total() { return *generation_tokens_; }
  Family<Counter>& num_preemptions_total() { return *preemptions_; }
  Family<Counter>& request_success_total() { return *success_; }
  Family<Counter>& request_errors_total() { return *errors_; }

 private:
  Family<Gauge>* requests_running_;
  Family<Gauge>* requests_waiting_;
  Family<Gauge>* kv_cache_usage_perc_;
  Family<Gauge>* kv_cache_bytes_;
  Family<Gauge>* kv_cache_fp16_equivalent_bytes_;
  Family<Gauge>* kv_cache_bytes_saved_;
  Family<Gauge>* kv_compression_ratio_;
  Family<Gauge>* kv_pages_free_;
  Family<Gauge>* kv_pages_total_;
  Family<Gauge>* kv_memory_bytes_;
  Family<Gauge>* kv_memory_used_bytes_;
  Family<Counter>* prefix_queries_;
  Family<Counter>* prefix_hits_;
  Family<Gauge>* prefix_bytes_;
  Family<Gauge>* cache_config_info_;
  Family<Histogram>* ttft_;
  Family<Histogram>* itl_;
  Family<Histogram>* e2e_;
  Family<Histogram>* queue_time_;
  Family<Histogram>* engine_step_;
  Family<Counter>* prompt_tokens_;
  Family<Counter>* generation_tokens_;
  Family<Counter>* preemptions_;
  Family<Counter>* success_;
  Family<Counter>* errors_;

  std::mutex kv_mu_;  // guards the per-codec totals below
  struct KvTotals {
    double bytes = 0, fp16 = 0;
    int64_t free = 0, total = 0;
  };
  std::map<std::string, KvTotals> kv_by_codec_;
  bool shared_memory_ = false;  // SetKvMemory was called: usage is the shared memory's
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_SERVER_METRICS_H_
