// end-to-end decode speed of the cuda runtime (CudaLlamaModel + CudaKvCache) per kv codec:
// `batch` sequences of one new token each at `ctx` cached tokens (one row per cell: --batch and
// --ctx take lists, paired in order, a single value paired with each), the whole forward step timed
// (host metadata, gemms, kv append/flush, attention, the greedy token or the logits copy). the model has the shape of
// Llama-3.1-8B or SmolLM2-135M with pseudo-random weights (or a gguf with --gguf), the caches
// pseudo-random pages and rings instead of prefills: speed depends on neither. prints a
// markdown table per model, with the sequences of `ctx` tokens that fit a kv budget of
// --budget-gb (1e9 bytes) from the cache's own spec. without a cuda device it says so, exit 0.
// usage: cuda_e2e_decode_bench [--models llama8b,smollm2] [--codecs fp16,vecinfer-k2v2,commvq-2,...]
//   [--batch 16[,1...]] [--ctx 32768[,131072...]] [--short-ctx 256] [--warmup 4] [--steps 32]
//   [--budget-gb 80]
//   [--gguf PATH] [--sink-tokens 32 (coded caches; fp16 has none)]
//   [--weights blocks,fp16 (how the gpu holds the weight matrices, a table each: blocks = a
//   gguf's q8_0/q4_0/q4_1/q4_k/q5_k/q6_k tensors resident in their format, random weights as
//   llama.cpp's Q4_K_M types; fp16 = dequantized at load / random fp16; default fp16)]
//   [--graphs default|on|off|both (cuda graphs for decode steps; both: a row of each, same cache)]
//   [--stagger 0|1 (1: sequence j starts j * page_tokens / batch tokens later, so that the
//   sequences flush pages at different steps, as in serving)]
//   [--logits argmax|host (argmax: each row's greedy token taken on the device, as the server
//   does for greedy requests and the PyTorch step for all; host: the logit rows copied back,
//   what sampling with temperature needs; default argmax)]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/cuda_bench_models.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "runtime/cuda/cuda_random_kv.h"
#include "runtime/model/llama_model.h"

namespace vqserve {
namespace {

struct Args {
  std::vector<std::string> models = {"llama8b", "smollm2"};
  std::vector<std::string> codecs = {"fp16", "vecinfer-k2v2", "vecinfer-k1v1", "commvq-2",
                                     "commvq-1"};
  std::vector<int> batches = {16}, ctxs = {32768};  // the cells: (batches[i], ctxs[i])
  int short_ctx = 256, warmup = 4, steps = 32;
  int sink_tokens = 32;  // as `vqserve serve`'s --kv-sink-tokens default
  double budget_gb = 80;
  std::string gguf;
  std::string graphs = "default";
  std::vector<std::string> weights = {"fp16"};
  bool stagger = false;
  bool host_logits = false;  // --logits host
};

struct Timing {
  double mean_ms = 0, min_ms = 0, max_ms = 0;
  int64_t replays = 0;  // timed steps that replayed a cuda graph
};

// runs warmup + steps decode steps (positions ctx, ctx + 1, ..., plus the stagger; page
// flushes happen as they fall) and times the last `steps`.
Timing TimeSteps(LlamaModel& model, CudaKvCache& cache, const Args& a, int n, int ctx,
                 int pages_per_seq, const std::vector<int32_t>& tables) {
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(n);
  std::vector<ForwardSeq> batch(n);
  std::vector<int32_t> argmax(n);
  std::vector<float> logits;
  std::vector<double> ms;
  int64_t replays0 = 0;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    if (s == a.warmup) replays0 = CudaGraphReplays(model);
    for (int j = 0; j < n; ++j) {
      tokens[j] = static_cast<int32_t>(rng() % model.config().vocab_size);
      ForwardSeq& f = batch[j];
      f.tokens = std::span<const int32_t>(&tokens[j], 1);
      f.cache = &cache;
      f.kv.slot = j;
      f.kv.block_table = tables.data() + size_t(j) * pages_per_seq;
      f.kv.num_blocks = pages_per_seq;
      f.kv.num_cached = ctx + s + (a.stagger ? j * cache.spec().page_tokens / n : 0);
      f.argmax = a.host_logits ? nullptr : &argmax[j];
    }
    logits.clear();
    const auto t0 = std::chrono::steady_clock::now();
    model.Forward(batch, &logits);  // synchronizes its stream before returning
    const auto t1 = std::chrono::steady_clock::now();
    if (s >= a.warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  Timing t;
  t.replays = CudaGraphReplays(model) - replays0;
  for (double m : ms) t.mean_ms += m / ms.size();
  t.min_ms = *std::min_element(ms.begin(), ms.end());
  t.max_ms = *std::max_element(ms.begin(), ms.end());
  return t;
}

// "16,1" -> {16, 1} (an empty or non-numeric item reads as 0, which main rejects).
std::vector<int> IntList(const std::string& v) {
  std::vector<int> out;
  for (absl::string_view x : absl::StrSplit(v, ',')) {
    out.push_back(std::atoi(std::string(x).c_str()));
  }
  return out;
}

int RunModel(const std::string& name, const std::string& weights_name, const Args& a) {
  const CudaWeights weights =
      weights_name == "blocks" ? CudaWeights::kBlocks : CudaWeights::kFp16;
  absl::StatusOr<std::unique_ptr<LlamaModel>> loaded =
      a.gguf.empty() ? MakeRandomCudaLlamaModel(ShapeFor(name), 1, weights)
                     : LoadCudaLlamaModel(a.gguf, weights);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(loaded.status().message()).c_str());
    return 1;
  }
  LlamaModel& model = **loaded;
  const ModelConfig& c = model.config();
  const KvShape shape = model.kv_shape();
  std::string cells;
  for (size_t i = 0; i < a.batches.size(); ++i) {
    cells += absl::StrCat(i ? ", " : "", a.batches[i], " x ", a.ctxs[i]);
  }
  std::printf("\n### %s: %d layers, hidden %d, %d q / %d kv heads, head_dim %d, ffn %d, vocab %d"
              " (%s; weights %s: %.2f GiB on the gpu)\n\nbatch x context %s; %d timed decode "
              "steps after %d warm-up; short context %d; kv budget %.0f GB; coded caches keep a "
              "%d-token fp16 sink%s; %s\n\n",
              name.c_str(), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
              c.ffn_size, c.vocab_size, a.gguf.empty() ? "random weights" : a.gguf.c_str(),
              weights_name.c_str(), CudaWeightBytes(model) / double(1 << 30),
              cells.c_str(), a.steps, a.warmup, a.short_ctx, a.budget_gb, a.sink_tokens,
              a.stagger ? "; sequences staggered over a page" : "",
              a.host_logits ? "logit rows copied to the host" : "greedy tokens taken on the device");
  std::printf("| codec | batch x ctx | ms/step | tokens/s | vs fp16 | ms/step at ctx %d |"
              " tokens/s at ctx %d | ctx-dependent share | KV MiB / seq at ctx | max seqs in %.0f"
              " GB | steps replayed (ctx, short ctx) |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n",
              a.short_ctx, a.short_ctx, a.budget_gb);
  std::fflush(stdout);
  std::vector<double> fp16_tps(a.batches.size(), 0);
  for (const std::string& codec : a.codecs) {
    for (size_t cell = 0; cell < a.batches.size(); ++cell) {
      const int n = a.batches[cell], ctx = a.ctxs[cell];
      KvCacheSpec probe_spec;
      {
        absl::StatusOr<std::unique_ptr<CudaKvCache>> probe =
            MakeCache(codec, shape, c.rope_theta, 1, 1, a.sink_tokens);
        if (!probe.ok()) {
          std::printf("| %s | error: %s |\n", codec.c_str(),
                      std::string(probe.status().message()).c_str());
          break;
        }
        probe_spec = (*probe)->spec();
      }
      const int pages_per_seq =
          std::max(PagesForTokens(probe_spec, ctx + a.warmup + a.steps),
                   PagesForTokens(probe_spec, a.short_ctx + a.warmup + a.steps)) + 2;  // stagger
      absl::StatusOr<std::unique_ptr<CudaKvCache>> made =
          MakeCache(codec, shape, c.rope_theta, n * pages_per_seq, n, a.sink_tokens);
      if (!made.ok()) {
        std::printf("| %s | %d x %d | error: %s |\n", codec.c_str(), n, ctx,
                    std::string(made.status().message()).c_str());
        continue;
      }
      CudaKvCache& cache = **made;
      if (absl::Status s = FillCudaKvCacheRandom(cache, 3); !s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return 1;
      }
      std::vector<int32_t> tables(size_t(n) * pages_per_seq);
      for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
      std::vector<int> modes = {-1};  // -1: the model's default
      if (a.graphs == "on" || a.graphs == "off") modes = {a.graphs == "on"};
      if (a.graphs == "both") modes = {0, 1};
      for (int mode : modes) {
        if (mode >= 0) SetCudaGraphs(model, mode == 1);
        const std::string label =
            codec + (modes.size() < 2 ? "" : mode == 1 ? " graphs" : " eager");
        const Timing t = TimeSteps(model, cache, a, n, ctx, pages_per_seq, tables);
        const Timing ts = TimeSteps(model, cache, a, n, a.short_ctx, pages_per_seq, tables);
        const KvCacheSpec& spec = cache.spec();
        const double seq_bytes =
            double(PagesForTokens(spec, ctx)) * spec.page_bytes + double(spec.slot_bytes);
        const double budget = a.budget_gb * 1e9 - double(spec.fixed_bytes);
        const long max_seqs = budget > 0 ? static_cast<long>(std::floor(budget / seq_bytes)) : 0;
        const double tps = n * 1000.0 / t.mean_ms;
        if (codec == "fp16" && fp16_tps[cell] == 0) fp16_tps[cell] = tps;
        char ratio[32] = "-";
        if (fp16_tps[cell] > 0) std::snprintf(ratio, sizeof(ratio), "%.2fx", tps / fp16_tps[cell]);
        std::printf(
            "| %s | %d x %d | %.3f (min %.3f, max %.3f) | %.0f | %s | %.3f | %.0f | %.0f%% | %.1f |"
            " %ld | %lld, %lld of %d |\n",
            label.c_str(), n, ctx, t.mean_ms, t.min_ms, t.max_ms, tps, ratio, ts.mean_ms,
            n * 1000.0 / ts.mean_ms, 100.0 * (t.mean_ms - ts.mean_ms) / t.mean_ms,
            seq_bytes / (1 << 20), max_seqs, static_cast<long long>(t.replays),
            static_cast<long long>(ts.replays), a.steps);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace vqserve

int main(int argc, char** argv) {
  using namespace vqserve;
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--models") a.models = absl::StrSplit(v, ',');
    else if (k == "--codecs") a.codecs = absl::StrSplit(v, ',');
    else if (k == "--batch") a.batches = IntList(v);
    else if (k == "--ctx") a.ctxs = IntList(v);
    else if (k == "--short-ctx") a.short_ctx = std::atoi(v.c_str());
    else if (k == "--warmup") a.warmup = std::atoi(v.c_str());
    else if (k == "--steps") a.steps = std::atoi(v.c_str());
    else if (k == "--sink-tokens") a.sink_tokens = std::atoi(v.c_str());
    else if (k == "--budget-gb") a.budget_gb = std::atof(v.c_str());
    else if (k == "--gguf") a.gguf = v;
    else if (k == "--graphs") a.graphs = v;
    else if (k == "--stagger") a.stagger = v == "1";
    else if (k == "--weights") a.weights = absl::StrSplit(v, ',');
    else if (k == "--logits" && (v == "argmax" || v == "host")) a.host_logits = v == "host";
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  // pair the cells: a single batch or context goes with each of the other list.
  if (a.batches.size() == 1) a.batches.resize(a.ctxs.size(), a.batches[0]);
  if (a.ctxs.size() == 1) a.ctxs.resize(a.batches.size(), a.ctxs[0]);
  if (a.batches.size() != a.ctxs.size()) {
    std::fprintf(stderr, "--batch and --ctx: lists of different lengths\n");
    return 2;
  }
  for (size_t i = 0; i < a.batches.size(); ++i) {
    if (a.batches[i] < 1 || a.ctxs[i] < 0) {
      std::fprintf(stderr, "--batch %d / --ctx %d: out of range\n", a.batches[i], a.ctxs[i]);
      return 2;
    }
  }
  if (a.steps < 1) return 2;
  std::string why;
  if (!CudaDeviceAvailable(&why)) {
    std::printf("cuda_e2e_decode_bench: skipped: %s\n", why.c_str());
    return 0;
  }
  for (const std::string& w : a.weights) {
    if (w != "fp16" && w != "blocks") {
      std::fprintf(stderr, "--weights: unknown '%s' (blocks, fp16)\n", w.c_str());
      return 2;
    }
  }
  for (const std::string& m : a.models) {
    for (const std::string& w : a.weights) {
      if (int rc = RunModel(m, w, a); rc != 0) return rc;
    }
  }
  return 0;
}
