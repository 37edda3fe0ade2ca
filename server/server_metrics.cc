#include "server/server_metrics.h"

namespace vqserve {
namespace {

// latency buckets in seconds, close to vllm's so that dashboards compare.
std::vector<double> TtftBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
}
std::vector<double> InterTokenBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
          0.1,   0.15,   0.2,   0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0,  10.0};
}
std::vector<double> RequestBuckets() {
  return {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};
}

// engine phases: from 50 us (sampling a small vocabulary) to seconds (a long prefill chunk).
std::vector<double> EngineStepBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01,
          0.015,   0.02,   0.03,    0.05,   0.075, 0.1,    0.25,  0.5,    1.0,  2.5};
}

}  // namespace

ServerMetrics::ServerMetrics(MetricsRegistry& r) {
  const std::string p = "vqserve:";
  requests_running_ =
      &r.AddGauge(p + "num_requests_running", "Number of requests in the running batch.");
  requests_waiting_ =
      &r.AddGauge(p + "num_requests_waiting", "Number of requests waiting to be scheduled.");
  kv_cache_usage_perc_ = &r.AddGauge(
      p + "kv_cache_usage_perc", "Fraction of KV cache pages in use over all pools (0-1).");
  kv_cache_bytes_ = &r.AddGauge(
      p + "kv_cache_bytes", "KV cache bytes held by live sequences (codes and fp16 residual).",
      {"codec"});
  kv_cache_fp16_equivalent_bytes_ = &r.AddGauge(
      p + "kv_cache_fp16_equivalent_bytes",
      "Bytes the tokens in the KV cache would take stored as fp16 keys and values.", {"codec"});
  kv_cache_bytes_saved_ = &r.AddGauge(
      p + "kv_cache_bytes_saved",
      "KV bytes saved by compression: fp16-equivalent bytes minus bytes held.", {"codec"});
  kv_compression_ratio_ = &r.AddGauge(
      p + "kv_compression_ratio",
      "fp16-equivalent KV bytes divided by KV bytes held (1 when nothing is held).", {"codec"});
  kv_pages_free_ = &r.AddGauge(p + "kv_pages_free", "Free KV cache pages.", {"codec"});
  kv_pages_total_ = &r.AddGauge(
      p + "kv_pages_total", "KV cache pages the codec could hold with all KV memory.", {"codec"});
  kv_memory_bytes_ = &r.AddGauge(p + "kv_memory_bytes",
                                 "The one KV memory budget every codec shares (bytes).");
  kv_memory_used_bytes_ = &r.AddGauge(
      p + "kv_memory_used_bytes",
      "Bytes of the shared KV memory lent to the codec (pages and residual rings).", {"codec"});
  prefix_queries_ = &r.AddCounter(p + "prefix_cache_queries_total",
                                  "Prompt tokens looked up in the prefix cache at admission.");
  prefix_hits_ = &r.AddCounter(p + "prefix_cache_hits_total",
                               "Prompt tokens found in the prefix cache (not computed).");
  prefix_bytes_ = &r.AddGauge(
      p + "prefix_cache_bytes",
      "KV bytes only the prefix cache holds (unreferenced pages, ring snapshots; reclaimable).",
      {"codec"});
  cache_config_info_ =
      &r.AddGauge(p + "cache_config_info", "KV cache configuration (value is always 1).",
                  {"page_size", "codec", "residual"});
  ttft_ = &r.AddHistogram(p + "time_to_first_token_seconds",
                          "Time from request arrival to its first generated token.",
                          TtftBuckets());
  itl_ = &r.AddHistogram(p + "inter_token_latency_seconds",
                         "Time between consecutive generated tokens of one request.",
                         InterTokenBuckets());
  e2e_ = &r.AddHistogram(p + "e2e_request_latency_seconds",
                         "Time from request arrival to its final message.", RequestBuckets());
  queue_time_ = &r.AddHistogram(p + "request_queue_time_seconds",
                                "Time a request waited before it was first scheduled.",
                                RequestBuckets());
  engine_step_ = &r.AddHistogram(
      p + "engine_step_seconds",
      "Time of the engine loop's phases (schedule, forward, sample, finish, publish) and of a "
      "whole step.",
      EngineStepBuckets(), {"phase"});
  prompt_tokens_ = &r.AddCounter(p + "prompt_tokens_total", "Prompt tokens processed.");
  generation_tokens_ = &r.AddCounter(p + "generation_tokens_total", "Tokens generated.");
  preemptions_ = &r.AddCounter(p + "num_preemptions_total",
                               "Sequences preempted (by recompute) because KV pages ran out.");
  success_ = &r.AddCounter(p + "request_success_total",
                           "Requests finished, by finish reason (length, stop, eos, abort).",
                           {"finished_reason"});
  errors_ = &r.AddCounter(p + "request_errors_total",
                          "Requests rejected or failed, by gRPC status code name.", {"code"});
  // series that must exist before the first event, so that rate() and alerts see zero.
  requests_running_->Get();
  requests_waiting_->Get();
  kv_cache_usage_perc_->Get();
  ttft_->Get();
  itl_->Get();
  e2e_->Get();
  queue_time_->Get();
  for (std::string_view phase : kEngineStepPhases) engine_step_->WithLabels({std::string(phase)});
  prompt_tokens_->Get();
  generation_tokens_->Get();
  preemptions_->Get();
  prefix_queries_->Get();
  prefix_hits_->Get();
}

void ServerMetrics::SetRequestsRunning(int64_t n) { requests_running_->Get().Set(n); }
void ServerMetrics::SetRequestsWaiting(int64_t n) { requests_waiting_->Get().Set(n); }

void ServerMetrics::SetKvState(const KvCodecState& s) {
  const LabelValues codec{s.codec};
  kv_cache_bytes_->WithLabels(codec).Set(s.bytes_in_use);
  kv_cache_fp16_equivalent_bytes_->WithLabels(codec).Set(s.fp16_equivalent_bytes);
  kv_cache_bytes_saved_->WithLabels(codec).Set(s.fp16_equivalent_bytes - s.bytes_in_use);
  kv_compression_ratio_->WithLabels(codec).Set(
      s.bytes_in_use > 0 ? s.fp16_equivalent_bytes / s.bytes_in_use : 1.0);
  kv_pages_free_->WithLabels(codec).Set(static_cast<double>(s.pages_free));
  kv_pages_total_->WithLabels(codec).Set(static_cast<double>(s.pages_total));
  kv_memory_used_bytes_->WithLabels(codec).Set(s.memory_bytes);

  std::lock_guard<std::mutex> lock(kv_mu_);
  if (shared_memory_) return;  // usage is the shared memory's (SetKvMemory)
  kv_by_codec_[s.codec] = KvTotals{s.bytes_in_use, s.fp16_equivalent_bytes, s.pages_free,
                                   s.pages_total};
  int64_t used = 0, total = 0;
  for (const auto& [name, t] : kv_by_codec_) {
    used += t.total - t.free;
    total += t.total;
  }
  kv_cache_usage_perc_->Get().Set(total > 0 ? static_cast<double>(used) / total : 0.0);
}

void ServerMetrics::SetKvState(std::string_view codec, double bytes_in_use,
                               double fp16_equivalent_bytes, int64_t pages_free,
                               int64_t pages_total) {
  SetKvState(KvCodecState{std::string(codec), bytes_in_use, fp16_equivalent_bytes, pages_free,
                          pages_total});
}

void ServerMetrics::SetKvMemory(double total_bytes, double in_use_bytes) {
  kv_memory_bytes_->Get().Set(total_bytes);
  std::lock_guard<std::mutex> lock(kv_mu_);
  shared_memory_ = true;
  kv_cache_usage_perc_->Get().Set(total_bytes > 0 ? in_use_bytes / total_bytes : 0.0);
}

void ServerMetrics::AddPrefixCache(int64_t queried_tokens, int64_t hit_tokens) {
  if (queried_tokens > 0) prefix_queries_->Get().Inc(static_cast<double>(queried_tokens));
  if (hit_tokens > 0) prefix_hits_->Get().Inc(static_cast<double>(hit_tokens));
}

void ServerMetrics::SetPrefixCacheBytes(std::string_view codec, double bytes) {
  prefix_bytes_->WithLabels({std::string(codec)}).Set(bytes);
}

void ServerMetrics::SetCacheConfig(int64_t page_size, std::string_view codec, int64_t residual) {
  cache_config_info_
      ->WithLabels({std::to_string(page_size), std::string(codec), std::to_string(residual)})
      .Set(1);
}

void ServerMetrics::IncPreemptions(int64_t n) { preemptions_->Get().Inc(static_cast<double>(n)); }

void ServerMetrics::ObserveTtft(double seconds) { ttft_->Get().Observe(seconds); }
void ServerMetrics::ObserveInterToken(double seconds) { itl_->Get().Observe(seconds); }
void ServerMetrics::ObserveE2e(double seconds) { e2e_->Get().Observe(seconds); }
void ServerMetrics::ObserveQueueTime(double seconds) { queue_time_->Get().Observe(seconds); }
void ServerMetrics::ObserveEngineStep(std::string_view phase, double seconds) {
  engine_step_->WithLabels({std::string(phase)}).Observe(seconds);
}

void ServerMetrics::AddPromptTokens(int64_t n) {
  prompt_tokens_->Get().Inc(static_cast<double>(n));
}
void ServerMetrics::AddGenerationTokens(int64_t n) {
  generation_tokens_->Get().Inc(static_cast<double>(n));
}

void ServerMetrics::IncSuccess(std::string_view finished_reason) {
  success_->WithLabels({std::string(finished_reason)}).Inc();
}
void ServerMetrics::IncError(std::string_view code) {
  errors_->WithLabels({std::string(code)}).Inc();
}

}  // namespace vqserve
