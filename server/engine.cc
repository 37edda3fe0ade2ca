#include "server/engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/model/sampler.h"
#include "server/stop_checker.h"

namespace vqserve {
namespace {

// host-sampled rows of a step drawn in parallel from this many (a steep top-p row of a 128K
// vocabulary takes about 0.17 ms: bench/sampler_bench.cc).
constexpr int kParallelDraws = 4;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* ReasonName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_STOP: return "stop";
    case v1::FINISH_REASON_EOS: return "eos";
    default: return "abort";
  }
}

// the scheduler over the caches' pools: one shared memory when the options give one.
Scheduler MakeScheduler(const EngineOptions& options,
                        const std::vector<std::unique_ptr<KvCache>>& caches) {
  std::vector<PagePoolConfig> pools;
  for (const auto& c : caches) {
    PagePoolConfig p;
    p.codec = c->spec().codec;
    p.num_pages = c->num_pages();
    p.num_slots = c->num_slots();
    p.page_tokens = c->spec().page_tokens;
    p.residual_tokens = c->spec().residual_tokens;
    p.page_bytes = c->spec().page_bytes;
    p.slot_bytes = c->spec().slot_bytes;
    pools.push_back(p);
  }
  if (options.shared_memory.num_chunks > 0) {
    return Scheduler(options.scheduler, std::move(pools), options.shared_memory);
  }
  return Scheduler(options.scheduler, std::move(pools));
}

}  // namespace

// one request in flight, owned by the engine thread.
struct Engine::Active {
  Active(EngineRequest r, const Tokenizer& tok)
      : req(std::move(r)), sampler(req.sampling), decoder(tok), stop(req.stop) {}
  EngineRequest req;
  std::shared_ptr<Sequence> seq;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;
  StreamDecoder decoder;
  StopChecker stop;
  int64_t submit_us = 0;
  int64_t first_scheduled_us = -1;
  int64_t last_token_us = -1;
  int64_t deadline_us = INT64_MAX;  // steady clock
  std::string deadline_source;
};

Engine::Engine(LlamaModel* model, std::vector<std::unique_ptr<KvCache>> caches,
               const EngineOptions& options, ServerMetrics* metrics)
    : model_(model),
      caches_(std::move(caches)),
      options_(options),
      metrics_(metrics),
      scheduler_(MakeScheduler(options, caches_)) {
  const ModelConfig& cfg = model_->config();
  limits_.max_model_len = std::min(options.scheduler.max_model_len, cfg.context_length);
  limits_.vocab_size = model_->tokenizer().vocab_size();
  for (const auto& c : caches_) limits_.codecs.push_back(c->spec().codec);
  limits_.default_codec =
      options.default_codec.empty() && !caches_.empty() ? limits_.codecs[0] : options.default_codec;
  limits_.default_max_tokens = options.default_max_tokens;
  // fp16 k and v of one token, all layers.
  fp16_bytes_per_token_ = 2.0 * 2.0 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim;
  snapshot_.pools.resize(caches_.size());
  for (size_t i = 0; i < caches_.size(); ++i) {
    const int p = static_cast<int>(i);
    snapshot_.pools[i] = {limits_.codecs[i], scheduler_.pages_free(p), scheduler_.pages_total(p),
                          scheduler_.slots_free(p), scheduler_.slots_total(p)};
    if (metrics_) {
      metrics_->SetCacheConfig(caches_[i]->spec().page_tokens, limits_.codecs[i],
                               caches_[i]->spec().residual_tokens);
    }
  }
  if (metrics_) PublishState();
}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    stopping_ = true;
    abort_all_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(
    const v1::GenerateRequest& request, const Deadline& deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return absl::UnavailableError("server is draining; not admitting requests");
  }
  absl::StatusOr<EngineRequest> req = ValidateRequest(request, model_->tokenizer(), limits_);
  if (!req.ok()) return req.status();
  auto a = std::make_unique<Active>(std::move(*req), model_->tokenizer());
  a->submit_us = NowUs();
  if (deadline.at != absl::InfiniteFuture()) {
    const absl::Duration left = deadline.at - absl::Now();
    a->deadline_us = left < absl::Hours(24 * 365)
                         ? a->submit_us + absl::ToInt64Microseconds(left)
                         : INT64_MAX;
    a->deadline_source = deadline.source;
  }
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return absl::UnavailableError("server is draining; not admitting requests");
    // submitted and not yet running (num_running lags by at most one step).
    int queued = snapshot_.num_active - snapshot_.num_running;
    if (queued >= options_.scheduler.max_waiting) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full (", queued, " requests waiting; bound ",
                       options_.scheduler.max_waiting, ")"));
    }
    int64_t id = next_id_++;
    if (a->req.request_id.empty()) a->req.request_id = absl::StrCat("req-", id);
    if (by_request_id_.count(a->req.request_id)) {
      return absl::AlreadyExistsError(
          absl::StrCat("request_id: '", a->req.request_id, "' is already in flight"));
    }
    by_request_id_[a->req.request_id] = id;
    stream = std::make_shared<RequestStream>(id, a->req.request_id);
    a->stream = stream;
    auto seq = std::make_shared<Sequence>();
    seq->id = id;
    seq->priority = a->req.priority;
    seq->pool = a->req.pool;
    seq->arrival_us = a->submit_us;
    seq->tokens = a->req.prompt;
    seq->num_prompt_tokens = static_cast<int>(a->req.prompt.size());
    seq->max_new_tokens = a->req.max_new_tokens;
    a->seq = std::move(seq);
    inbox_.push_back(std::move(a));
    ++snapshot_.num_active;
  }
  cv_.notify_all();
  return stream;
}

bool Engine::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_request_id_.find(request_id);
    if (it == by_request_id_.end()) return false;
    aborts_.push_back(it->second);
  }
  cv_.notify_all();
  return true;
}

void Engine::Cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

void Engine::StopAdmission() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

bool Engine::admitting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !draining_;
}

void Engine::AbortAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    abort_all_ = true;
  }
  cv_.notify_all();
}

EngineSnapshot Engine::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

void Engine::Loop() {
  while (true) {
    std::vector<std::unique_ptr<Active>> incoming;
    std::vector<int64_t> aborts;
    bool abort_all = false;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || abort_all_ || !inbox_.empty() || !aborts_.empty() ||
               !active_.empty();
      });
      incoming.swap(inbox_);
      aborts.swap(aborts_);
      abort_all = abort_all_;
      abort_all_ = false;
      stopping = stopping_;
    }
    const int64_t loop_start_us = NowUs();
    for (auto& a : incoming) Admit(std::move(a));
    if (abort_all) {
      for (auto& [id, a] : active_) aborts.push_back(id);
    }
    for (auto& [id, a] : active_) {
      if (a->stream->cancelled()) aborts.push_back(id);
    }
    for (int64_t id : aborts) {
      if (active_.count(id)) FinishActive(id, v1::FINISH_REASON_ABORT);
    }
    // past their deadline, queued or running: ended here, so their pages come back even when
    // the client never reads again.
    const int64_t now_us = NowUs();
    std::vector<int64_t> expired;
    for (auto& [id, a] : active_) {
      if (a->deadline_us <= now_us) expired.push_back(id);
    }
    for (int64_t id : expired) {
      const Active& a = *active_.at(id);
      FinishActive(id, v1::FINISH_REASON_ABORT,
                   absl::DeadlineExceededError(absl::StrCat(
                       "deadline: the request ran past ", a.deadline_source, " (",
                       (a.deadline_us - a.submit_us) / 1000, " ms after arrival; ",
                       a.seq->num_generated(), " tokens generated)")));
    }
    if (stopping && active_.empty()) {
      PublishState();
      return;
    }
    const bool stepped = !active_.empty() && Step();
    const int64_t publish_start_us = NowUs();
    PublishState();
    if (metrics_ && stepped) {
      const int64_t end_us = NowUs();
      metrics_->ObserveEngineStep("publish", (end_us - publish_start_us) * 1e-6);
      metrics_->ObserveEngineStep("step", (end_us - loop_start_us) * 1e-6);
    }
  }
}

void Engine::Admit(std::unique_ptr<Active> a) {
  int64_t id = a->seq->id;
  absl::Status st = scheduler_.Add(a->seq);
  if (!st.ok()) {
    if (metrics_) metrics_->IncError(st.code() == absl::StatusCode::kResourceExhausted
                                         ? "RESOURCE_EXHAUSTED"
                                         : "INVALID_ARGUMENT");
    a->stream->Fail(st);
    std::lock_guard<std::mutex> lock(mu_);
    by_request_id_.erase(a->req.request_id);
    --snapshot_.num_active;
    return;
  }
  if (metrics_) metrics_->AddPromptTokens(a->seq->num_prompt_tokens);
  active_[id] = std::move(a);
}

bool Engine::Step() {
  const int64_t schedule_start_us = NowUs();
  ScheduleOutput out = scheduler_.Schedule();
  if (!out.preempted.empty() && metrics_) {
    metrics_->IncPreemptions(static_cast<int64_t>(out.preempted.size()));
  }
  if (out.empty()) {
    // nothing fits this step (should not persist); wait briefly for aborts or arrivals.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(5));
    return false;
  }
  const int64_t start_us = NowUs();
  // prefix hits start from a cached ring snapshot: copied in before the step writes the ring.
  for (const SlotCopy& c : out.restores) caches_[c.pool]->CopySlot(c.from, c.to);
  std::vector<ForwardSeq> batch;
  batch.reserve(out.seqs.size());
  // greedy sequences get their token's id from the model (on the gpu: no logits copied back).
  std::vector<int32_t> argmax(out.seqs.size(), 0);
  for (const ScheduledSeq& s : out.seqs) {
    Sequence* seq = s.seq;
    ForwardSeq f;
    f.tokens = std::span<const int32_t>(seq->tokens.data() + seq->num_computed,
                                        static_cast<size_t>(s.num_new_tokens));
    f.cache = caches_[seq->pool].get();
    f.kv.slot = seq->slot;
    f.kv.block_table = seq->block_table.data();
    f.kv.num_blocks = static_cast<int>(seq->block_table.size());
    f.kv.num_cached = seq->num_computed;
    f.want_logits = s.samples;
    Active& a = *active_.at(seq->id);
    if (s.samples && a.sampler.argmax_only()) f.argmax = &argmax[batch.size()];
    batch.push_back(f);
    if (a.first_scheduled_us < 0) {
      a.first_scheduled_us = start_us;
      if (metrics_) metrics_->ObserveQueueTime((start_us - a.submit_us) * 1e-6);
    }
  }
  logits_.clear();
  model_->Forward(batch, &logits_);
  const int vocab = model_->config().vocab_size;
  const int64_t sample_start_us = NowUs();

  // one token per sampling sequence, in batch order: greedy ones from the model, the others
  // drawn on the host from their logit rows, several rows at once (each row its own sampler:
  // the same tokens as one after another).
  struct HostDraw {
    size_t k;  // index in sampled
    Sampler* sampler;
    std::span<const float> logits;
    std::span<const int32_t> history;
  };
  std::vector<SampledToken> sampled;
  std::vector<HostDraw> draws;
  int row = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    if (!s.samples) continue;
    sampled.emplace_back();
    if (batch[i].argmax != nullptr) {
      sampled.back().id = argmax[i];
      continue;
    }
    Active& a = *active_.at(s.seq->id);
    draws.push_back({sampled.size() - 1, &a.sampler,
                     std::span<const float>(logits_.data() + static_cast<size_t>(row) * vocab,
                                            vocab),
                     s.seq->tokens});
    ++row;
  }
  const int num_draws = static_cast<int>(draws.size());
#pragma omp parallel for schedule(dynamic, 1) if (num_draws >= kParallelDraws)
  for (int j = 0; j < num_draws; ++j) {
    sampled[draws[j].k] = draws[j].sampler->Sample(draws[j].logits, draws[j].history);
  }
  std::vector<int32_t> sampled_ids;
  for (const SampledToken& t : sampled) sampled_ids.push_back(t.id);
  const int64_t finish_start_us = NowUs();
  // ring snapshots for the prefix cache, before any finished sequence's slot is released.
  for (const SlotCopy& c : scheduler_.Postprocess(out, sampled_ids)) {
    caches_[c.pool]->CopySlot(c.from, c.to);
  }
  if (metrics_) {
    metrics_->AddPrefixCache(scheduler_.prefix_queries() - prefix_queries_seen_,
                             scheduler_.prefix_hits() - prefix_hits_seen_);
  }
  prefix_queries_seen_ = scheduler_.prefix_queries();
  prefix_hits_seen_ = scheduler_.prefix_hits();

  const int64_t now = NowUs();
  size_t k = 0;
  for (const ScheduledSeq& s : out.seqs) {
    if (!s.samples) continue;
    HandleToken(*active_.at(s.seq->id), sampled[k++], now);
  }
  // finished requests were released by HandleToken.
  if (metrics_) {
    metrics_->ObserveEngineStep("schedule", (start_us - schedule_start_us) * 1e-6);
    metrics_->ObserveEngineStep("forward", (sample_start_us - start_us) * 1e-6);
    metrics_->ObserveEngineStep("sample", (finish_start_us - sample_start_us) * 1e-6);
    metrics_->ObserveEngineStep("finish", (NowUs() - finish_start_us) * 1e-6);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++snapshot_.steps;
  return true;
}

bool Engine::HandleToken(Active& a, const SampledToken& tok, int64_t now_us) {
  if (metrics_) {
    metrics_->AddGenerationTokens(1);
    if (a.last_token_us < 0) {
      metrics_->ObserveTtft((now_us - a.submit_us) * 1e-6);
    } else {
      metrics_->ObserveInterToken((now_us - a.last_token_us) * 1e-6);
    }
  }
  a.last_token_us = now_us;
  const Tokenizer& tokenizer = model_->tokenizer();
  v1::GenerateResponse delta;
  auto add_token = [&] {
    delta.add_token_ids(tok.id);
    if (a.req.sampling.logprobs > 0) {
      v1::TokenLogprob* lp = delta.add_logprobs();
      lp->set_token_id(tok.id);
      lp->set_logprob(tok.logprob);
      for (const auto& [id, p] : tok.top_logprobs) {
        v1::TopLogprob* t = lp->add_top();
        t->set_token_id(id);
        t->set_logprob(p);
      }
    }
  };
  std::optional<v1::FinishReason> reason;
  if (!a.req.ignore_eos && tokenizer.IsEndOfGeneration(tok.id)) {
    reason = v1::FINISH_REASON_EOS;
  } else if (std::find(a.req.stop_token_ids.begin(), a.req.stop_token_ids.end(), tok.id) !=
             a.req.stop_token_ids.end()) {
    reason = v1::FINISH_REASON_STOP;
  } else {
    add_token();
    bool matched = false;
    delta.set_text(a.stop.Add(a.decoder.Push(tok.id), &matched));
    if (matched) reason = v1::FINISH_REASON_STOP;
  }
  if (!reason && (a.seq->num_generated() >= a.req.max_new_tokens ||
                  a.seq->num_tokens() >= limits_.max_model_len)) {
    reason = v1::FINISH_REASON_LENGTH;
  }
  if (reason && *reason != v1::FINISH_REASON_STOP) {
    // the end without a stop match: everything held back goes out.
    bool matched = false;
    delta.mutable_text()->append(a.stop.Add(a.decoder.Flush(), &matched));
    if (matched) {
      reason = v1::FINISH_REASON_STOP;
    } else {
      delta.mutable_text()->append(a.stop.Flush());
    }
  }
  if (delta.token_ids_size() > 0 || !delta.text().empty()) a.stream->Push(delta);
  if (reason) FinishActive(a.seq->id, *reason);
  return reason.has_value();
}

void Engine::FinishActive(int64_t id, v1::FinishReason reason, const absl::Status& failure) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Active& a = *it->second;
  const Sequence& seq = *a.seq;
  const KvCacheSpec& spec = caches_[seq.pool]->spec();
  v1::Usage usage;
  usage.set_prompt_tokens(seq.num_prompt_tokens);
  usage.set_completion_tokens(seq.num_generated());
  usage.set_kv_codec(a.req.codec);
  usage.set_num_preemptions(seq.num_preemptions);
  usage.set_cached_prompt_tokens(seq.num_cached_tokens);
  // the request's own kv: its pages and the tokens it holds in its fp16 ring (not the whole
  // preallocated ring).
  const int cached = seq.num_computed;
  const double fp16 = cached * fp16_bytes_per_token_;
  const int coded = CodedTokens(spec, cached);
  const int64_t held = static_cast<int64_t>(seq.block_table.size() * spec.page_bytes) +
                       static_cast<int64_t>((cached - coded) * fp16_bytes_per_token_);
  usage.set_kv_bytes(held);
  const double used = coded * spec.bytes_per_token + (cached - coded) * fp16_bytes_per_token_;
  usage.set_kv_fp16_equivalent_bytes(static_cast<int64_t>(fp16));
  usage.set_kv_compression_ratio(used > 0 ? fp16 / used : 1.0);
  if (a.first_scheduled_us >= 0) {
    usage.set_queue_time_seconds((a.first_scheduled_us - a.submit_us) * 1e-6);
  }
  scheduler_.Release(id);
  if (metrics_ && failure.ok()) {
    metrics_->IncSuccess(ReasonName(reason));
    metrics_->ObserveE2e((NowUs() - a.submit_us) * 1e-6);
  } else if (metrics_) {
    metrics_->IncError("DEADLINE_EXCEEDED");  // the only failure ended here
  }
  std::shared_ptr<RequestStream> stream = a.stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    by_request_id_.erase(a.req.request_id);
    --snapshot_.num_active;
  }
  active_.erase(it);
  if (failure.ok()) {
    stream->Finish(reason, usage);
  } else {
    stream->Fail(failure);
  }
}

void Engine::PublishState() {
  std::vector<double> bytes(caches_.size(), 0.0), fp16(caches_.size(), 0.0);
  std::vector<int> seqs(caches_.size(), 0);
  for (const auto& [id, a] : active_) {
    const Sequence& seq = *a->seq;
    const KvCacheSpec& spec = caches_[seq.pool]->spec();
    bytes[seq.pool] += seq.block_table.size() * spec.page_bytes +
                       (seq.slot >= 0 ? spec.slot_bytes : 0);
    fp16[seq.pool] += seq.num_computed * fp16_bytes_per_token_;
    seqs[seq.pool] += seq.slot >= 0;
  }
  std::lock_guard<std::mutex> lock(mu_);
  int64_t in_use = 0;
  for (size_t i = 0; i < caches_.size(); ++i) {
    auto& p = snapshot_.pools[i];
    const int pool = static_cast<int>(i);
    p.pages_free = scheduler_.pages_free(pool);
    p.pages_total = scheduler_.pages_total(pool);
    p.slots_free = scheduler_.slots_free(pool);
    p.slots_total = scheduler_.slots_total(pool);
    p.memory_bytes = static_cast<int64_t>(scheduler_.bytes_lent(pool));
    p.num_sequences = seqs[i];
    const KvCacheSpec& spec = caches_[i]->spec();
    const int evictable = scheduler_.prefix_evictable_pages(pool);
    const int snapshots = scheduler_.prefix_snapshots(pool);
    p.pages_in_use = scheduler_.pages_used(pool) - evictable;
    p.slots_in_use = scheduler_.slots_used(pool) - snapshots;
    p.cached_bytes = static_cast<int64_t>(evictable * spec.page_bytes + snapshots * spec.slot_bytes);
    in_use += static_cast<int64_t>(p.pages_in_use * spec.page_bytes +
                                   p.slots_in_use * spec.slot_bytes);
    if (metrics_) {
      metrics_->SetKvState(KvCodecState{p.codec, bytes[i], fp16[i], p.pages_free, p.pages_total,
                                        static_cast<double>(p.memory_bytes)});
      metrics_->SetPrefixCacheBytes(p.codec, static_cast<double>(p.cached_bytes));
    }
  }
  snapshot_.memory_total = static_cast<int64_t>(scheduler_.shared_bytes_total());
  snapshot_.memory_free = static_cast<int64_t>(scheduler_.shared_bytes_free());
  snapshot_.memory_in_use = in_use;
  if (metrics_ && snapshot_.memory_total > 0) {
    metrics_->SetKvMemory(static_cast<double>(snapshot_.memory_total),
                          static_cast<double>(in_use));
  }
  snapshot_.num_waiting = scheduler_.num_waiting();
  snapshot_.num_running = scheduler_.num_running();
  snapshot_.num_preemptions = scheduler_.num_preemptions();
  if (metrics_) {
    metrics_->SetRequestsRunning(snapshot_.num_running);
    metrics_->SetRequestsWaiting(snapshot_.num_waiting + static_cast<int>(inbox_.size()));
  }
}

v1::ModelInfo Engine::ModelInfo() const {
  const ModelConfig& cfg = model_->config();
  v1::ModelInfo info;
  info.set_model_name(cfg.name);
  info.set_architecture(cfg.architecture);
  info.set_num_layers(cfg.num_layers);
  info.set_hidden_size(cfg.hidden_size);
  info.set_num_heads(cfg.num_heads);
  info.set_num_kv_heads(cfg.num_kv_heads);
  info.set_head_dim(cfg.head_dim);
  info.set_vocab_size(limits_.vocab_size);
  info.set_context_length(limits_.max_model_len);
  info.set_default_kv_codec(limits_.default_codec);
  info.set_kv_memory_bytes(static_cast<int64_t>(options_.kv_memory_bytes));
  info.set_max_num_seqs(options_.scheduler.max_num_seqs);
  info.set_max_batched_tokens(options_.scheduler.max_batched_tokens);
  info.set_device(options_.device);
  const double values_per_token = 2.0 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim;
  const EngineSnapshot snap = Snapshot();
  info.set_kv_memory_shared_bytes(snap.memory_total);
  info.set_kv_memory_free_bytes(snap.memory_free);
  info.set_kv_chunk_bytes(static_cast<int64_t>(options_.shared_memory.chunk_bytes));
  for (size_t i = 0; i < caches_.size(); ++i) {
    const KvCacheSpec& s = caches_[i]->spec();
    const EngineSnapshot::Pool& p = snap.pools[i];
    v1::CodecInfo* ci = info.add_codecs();
    ci->set_name(s.codec);
    ci->set_bits_per_value(s.bytes_per_token * 8.0 / values_per_token);
    ci->set_page_tokens(s.page_tokens);
    ci->set_residual_tokens(s.residual_tokens);
    ci->set_page_bytes(static_cast<int64_t>(s.page_bytes));
    ci->set_num_pages(p.pages_total);
    ci->set_num_slots(p.slots_total);
    ci->set_kv_capacity_tokens(static_cast<int64_t>(p.pages_total) * s.page_tokens);
    ci->set_kv_capacity_bytes(
        snap.memory_total > 0
            ? snap.memory_total + static_cast<int64_t>(s.fixed_bytes)
            : static_cast<int64_t>(s.page_bytes * p.pages_total + s.slot_bytes * p.slots_total +
                                   s.fixed_bytes));
    ci->set_compression_ratio(s.bytes_per_token > 0 ? fp16_bytes_per_token_ / s.bytes_per_token
                                                    : 1.0);
    ci->set_kv_memory_used_bytes(p.memory_bytes);
    ci->set_num_sequences(p.num_sequences);
  }
  return info;
}

}  // namespace vqserve
