// `vqserve generate`: runs the model (cpu, or cuda with --device cuda) on one prompt with a kv
// cache of --kv-codec (fp16 by default; coded codecs with their --codebooks) and streams the text
// to stdout.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/model/llama_model.h"
#include "runtime/kv/paged_kv_cache.h"
#include "runtime/model/sampler.h"
#include "tools/vqserve/codec_choice.h"
#include "tools/vqserve/command.h"
#include "tools/vqserve/gpu_weights_flag.h"

namespace vqserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: vqserve generate [--model PATH] --prompt TEXT [--chat] [--max-tokens N]\n"
    "         [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--repetition-penalty R]\n"
    "         [--seed S] [--threads N] [--fp32] [--device cpu|cuda]\n"
    "         [--kv-codec C (default fp16) --codebooks FILE.vqcb] [--kv-sink-tokens N (32)]\n"
    "         [--gpu-weights blocks|fp16 (cuda: gguf blocks kept, the default, or dequantized\n"
    "           at load)]\n";

struct GenerateFlags {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string prompt;
  std::string device = "cpu";  // cpu, or cuda (weights and kv cache on the gpu)
  CudaWeights gpu_weights = CudaWeights::kFp16;
  bool chat = false;
  bool fp32 = false;  // fp32 weights for decode steps too (no q4/q8 blocks)
  int max_tokens = 128;
  int threads = 0;
  std::string kv_codec = "fp16";
  std::string codebooks;  // artifact(s) for kv_codec, comma-separated
  int sink_tokens = 32;   // as serve's --kv-sink-tokens (fp16 has none)
  SamplingParams sampling;
};

// parses argv into flags; false (after printing why) on a bad flag.
bool ParseFlags(int argc, char** argv, GenerateFlags* f) {
  bool have_prompt = false;
  std::string gpu_weights;  // empty: blocks on cuda (ParseGpuWeights)
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char** out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vqserve generate: %s needs a value\n", a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (a == "--chat") {
      f->chat = true;
    } else if (a == "--fp32") {
      f->fp32 = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stderr);
      std::exit(0);
    } else if (a == "--model" || a == "--prompt" || a == "--max-tokens" || a == "--temperature" ||
               a == "--top-p" || a == "--top-k" || a == "--min-p" || a == "--seed" ||
               a == "--threads" || a == "--repetition-penalty" || a == "--device" ||
               a == "--kv-codec" || a == "--codebooks" || a == "--kv-sink-tokens" ||
               a == "--gpu-weights") {
      if (!value(&v)) return false;
      if (a == "--model") f->model = v;
      if (a == "--prompt") f->prompt = v, have_prompt = true;
      if (a == "--max-tokens") f->max_tokens = std::atoi(v);
      if (a == "--temperature") f->sampling.temperature = std::strtof(v, nullptr);
      if (a == "--top-p") f->sampling.top_p = std::strtof(v, nullptr);
      if (a == "--top-k") f->sampling.top_k = std::atoi(v);
      if (a == "--min-p") f->sampling.min_p = std::strtof(v, nullptr);
      if (a == "--repetition-penalty") f->sampling.repetition_penalty = std::strtof(v, nullptr);
      if (a == "--seed") f->sampling.seed = std::strtoull(v, nullptr, 10);
      if (a == "--threads") f->threads = std::atoi(v);
      if (a == "--device") f->device = v;
      if (a == "--kv-codec") f->kv_codec = v;
      if (a == "--codebooks") f->codebooks = v;
      if (a == "--kv-sink-tokens") f->sink_tokens = std::atoi(v);
      if (a == "--gpu-weights") gpu_weights = v;
    } else {
      std::fprintf(stderr, "vqserve generate: unknown flag '%s'\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  if (!have_prompt) {
    std::fprintf(stderr, "vqserve generate: --prompt is required\n%s", kUsage);
    return false;
  }
  if (f->device != "cpu" && f->device != "cuda") {
    std::fprintf(stderr, "vqserve generate: --device must be cpu or cuda\n");
    return false;
  }
  if (const std::string why = ParseGpuWeights(gpu_weights, f->device, &f->gpu_weights);
      !why.empty()) {
    std::fprintf(stderr, "vqserve generate: %s\n", why.c_str());
    return false;
  }
  if (f->max_tokens < 0) f->max_tokens = 0;
  return true;
}

int RunGenerate(int argc, char** argv) {
  GenerateFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  LoadOptions options;
  options.num_threads = flags.threads;
  options.quantized_decode = !flags.fp32;
  const bool cuda = flags.device == "cuda";
  auto model = cuda ? LoadCudaLlamaModel(flags.model, flags.gpu_weights)
                    : LlamaModel::Load(flags.model, options);
  if (!model.ok()) {
    std::fprintf(stderr, "vqserve generate: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  LlamaModel& m = **model;
  const Tokenizer& tok = m.tokenizer();
  std::string text = flags.prompt;
  if (flags.chat) text = tok.ApplyChatTemplate({{"user", flags.prompt}}, true);
  std::vector<int32_t> tokens = tok.Encode(text, /*add_bos=*/true, /*parse_special=*/flags.chat);
  if (tokens.empty()) {
    std::fprintf(stderr, "vqserve generate: the prompt has no tokens\n");
    return 2;
  }
  const int context = static_cast<int>(tokens.size()) + flags.max_tokens;
  if (context > m.config().context_length) {
    std::fprintf(stderr, "vqserve generate: prompt + max tokens (%d) exceed the context (%d)\n",
                 context, m.config().context_length);
    return 2;
  }
  // a --kv-codec cache in host memory, or in device memory for the cuda model; fp16's page
  // count (no residual window) bounds every codec's.
  const int pages = PagesForTokens(MakePagedKvCache(MakeFp16Codec(m.kv_shape()), 0, 1)->spec(),
                                   context) + 1;
  if (cuda) {
    if (absl::Status st = CudaKvCodecSupported(flags.kv_codec, m.config().head_dim); !st.ok()) {
      std::fprintf(stderr, "vqserve generate: --kv-codec with --device cuda: %s\n",
                   std::string(st.message()).c_str());
      return 2;
    }
  }
  absl::StatusOr<KvCacheMakers> maker = MakeKvCacheMakers(
      flags.model, m.kv_shape(), flags.codebooks, flags.device, flags.sink_tokens);
  absl::StatusOr<std::unique_ptr<KvCache>> made =
      maker.ok() ? maker->probe(flags.kv_codec, pages, 1) : maker.status();
  if (!made.ok()) {
    std::fprintf(stderr, "vqserve generate: %s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<KvCache> cache = std::move(*made);
  std::vector<int32_t> blocks(pages);
  for (int i = 0; i < pages; ++i) blocks[i] = i;

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  ForwardSeq seq;
  seq.cache = cache.get();
  seq.kv.slot = 0;
  seq.kv.block_table = blocks.data();
  seq.kv.num_blocks = pages;
  std::vector<float> logits;
  constexpr int kChunk = 512;
  const int num_prompt = static_cast<int>(tokens.size());
  for (int done = 0; done < num_prompt; done += kChunk) {
    const int n = std::min(kChunk, num_prompt - done);
    seq.tokens = std::span<const int32_t>(tokens.data() + done, n);
    seq.kv.num_cached = done;
    logits.clear();
    m.Forward({&seq, 1}, &logits);
  }
  const auto t1 = Clock::now();
  Sampler sampler(flags.sampling);
  StreamDecoder decoder(tok);
  int generated = 0;
  while (generated < flags.max_tokens) {
    SampledToken next = sampler.Sample(logits, tokens);
    if (tok.IsEndOfGeneration(next.id)) break;
    tokens.push_back(next.id);
    ++generated;
    const std::string piece = decoder.Push(next.id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (generated == flags.max_tokens) break;
    seq.tokens = std::span<const int32_t>(&tokens.back(), 1);
    seq.kv.num_cached = static_cast<int>(tokens.size()) - 1;
    logits.clear();
    m.Forward({&seq, 1}, &logits);
  }
  const std::string rest = decoder.Flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  const auto t2 = Clock::now();
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "[%d prompt tokens in %.3f s (%.1f tok/s); %d generated in %.3f s (%.1f tok/s)]\n",
               num_prompt, prefill_s, num_prompt / prefill_s, generated, decode_s,
               generated > 0 ? generated / decode_s : 0.0);
  return 0;
}

CommandRegistrar kGenerate("generate",
                           "generate text from a prompt on the cpu or gpu (streams to stdout)",
                           RunGenerate);

}  // namespace
}  // namespace vqserve::cli
