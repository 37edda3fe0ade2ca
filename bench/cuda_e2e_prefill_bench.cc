// time to first token of the cuda runtime (CudaLlamaModel + CudaKvCache) per kv codec: one
// sequence's prompt of P random tokens fed in chunks of --chunk tokens (the scheduler's
// max_batched_tokens), the logits of the last one copied back, every step timed with the host
// clock; with the tensor-core prefill kernels (their key splits as the launcher chooses, and one
// split) and with the reference kernels (one warp per token and head), on the same model and
// cache. the model has the shape of Llama-3.1-8B or
// SmolLM2-135M with pseudo-random weights (speed does not depend on weight values). the
// reference runs only up to --ref-max prompt tokens. without a cuda device it says so, exit 0.
// usage: cuda_e2e_prefill_bench [--models llama8b,smollm2] [--codecs
// fp16,kivi-k2v2,vecinfer-k2v2,commvq-1]
//   [--prompts 2048,8192,32768] [--chunk 512] [--ref-max 8192] [--sink-tokens 32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/cuda_bench_models.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "runtime/model/llama_model.h"

namespace vqserve {
namespace {

struct Args {
  std::vector<std::string> models = {"llama8b", "smollm2"};
  std::vector<std::string> codecs = {"fp16", "kivi-k2v2", "vecinfer-k2v2", "commvq-1"};
  std::vector<int> prompts = {2048, 8192, 32768};
  int chunk = 512, ref_max = 8192, sink_tokens = 32;
};

// seconds to feed `prompt` tokens in chunks into slot 0 of `cache` (pages 0, 1, ...).
double Prefill(LlamaModel& model, CudaKvCache& cache, int prompt, int chunk, int pages) {
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(prompt), table(pages);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % model.config().vocab_size);
  for (int i = 0; i < pages; ++i) table[i] = i;
  std::vector<float> logits;
  const auto t0 = std::chrono::steady_clock::now();
  for (int done = 0; done < prompt; done += chunk) {
    const int m = std::min(chunk, prompt - done);
    ForwardSeq f;
    f.tokens = std::span<const int32_t>(tokens.data() + done, m);
    f.cache = &cache;
    f.kv.slot = 0;
    f.kv.block_table = table.data();
    f.kv.num_blocks = pages;
    f.kv.num_cached = done;
    f.want_logits = done + m == prompt;
    logits.clear();
    model.Forward(std::span<const ForwardSeq>(&f, 1), &logits);  // synchronizes its stream
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int RunModel(const std::string& name, const Args& a) {
  absl::StatusOr<std::unique_ptr<LlamaModel>> loaded = MakeRandomCudaLlamaModel(ShapeFor(name), 1);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(loaded.status().message()).c_str());
    return 1;
  }
  LlamaModel& model = **loaded;
  const ModelConfig& c = model.config();
  std::printf(
      "\n### %s: %d layers, %d q / %d kv heads, head_dim %d (random weights); chunks of "
      "%d tokens; coded caches keep a %d-token fp16 sink\n\n"
      "| codec | prompt | TTFT s (tiled) | prompt tokens/s | TTFT s (tiled, 1 split) | "
      "splits' gain | TTFT s (reference) | speed-up |\n"
      "|---|---|---|---|---|---|---|---|\n",
      name.c_str(), c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, a.chunk, a.sink_tokens);
  const int longest = *std::max_element(a.prompts.begin(), a.prompts.end());
  for (const std::string& codec : a.codecs) {
    const int pages = longest / 32 + 8;
    absl::StatusOr<std::unique_ptr<CudaKvCache>> made =
        MakeCache(codec, model.kv_shape(), c.rope_theta, pages, 1, a.sink_tokens);
    if (!made.ok()) {
      std::printf("| %s | error: %s |\n", codec.c_str(),
                  std::string(made.status().message()).c_str());
      continue;
    }
    CudaKvCache& cache = **made;
    SetCudaTiledPrefill(model, true);
    Prefill(model, cache, std::min(a.chunk * 2, longest), a.chunk, pages);  // warm-up
    for (int prompt : a.prompts) {
      SetCudaTiledPrefill(model, true);
      SetCudaPrefillSplits(model, 1);
      const double one = Prefill(model, cache, prompt, a.chunk, pages);
      SetCudaPrefillSplits(model, 0);
      const double tiled = Prefill(model, cache, prompt, a.chunk, pages);
      char ref[32] = "-", up[32] = "-";
      if (prompt <= a.ref_max) {
        SetCudaTiledPrefill(model, false);
        const double r = Prefill(model, cache, prompt, a.chunk, pages);
        std::snprintf(ref, sizeof(ref), "%.3f", r);
        std::snprintf(up, sizeof(up), "%.1fx", r / tiled);
      }
      std::printf("| %s | %d | %.3f | %.0f | %.3f | %.2fx | %s | %s |\n", codec.c_str(), prompt,
                  tiled, prompt / tiled, one, one / tiled, ref, up);
      std::fflush(stdout);
    }
    SetCudaTiledPrefill(model, true);
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
    if (k == "--models") {
      a.models = absl::StrSplit(v, ',');
    } else if (k == "--codecs") {
      a.codecs = absl::StrSplit(v, ',');
    } else if (k == "--prompts") {
      a.prompts.clear();
      for (absl::string_view p : absl::StrSplit(v, ','))
        a.prompts.push_back(std::atoi(std::string(p).c_str()));
    } else if (k == "--chunk") {
      a.chunk = std::atoi(v.c_str());
    } else if (k == "--ref-max") {
      a.ref_max = std::atoi(v.c_str());
    } else if (k == "--sink-tokens") {
      a.sink_tokens = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  std::string why;
  if (!CudaDeviceAvailable(&why)) {
    std::printf("cuda_e2e_prefill_bench: skipped: %s\n", why.c_str());
    return 0;
  }
  if (a.chunk < 1 || a.prompts.empty()) return 2;
  for (const std::string& m : a.models) {
    if (int rc = RunModel(m, a); rc != 0) return rc;
  }
  return 0;
}
