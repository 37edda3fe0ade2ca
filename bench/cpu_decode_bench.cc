// prefill and decode speed of the cpu runtime on one sequence (a plain main, not google
// benchmark): bench/cpu_vs_llamacpp.sh runs it beside llama.cpp.
// usage: cpu_decode_bench [--model PATH] [--threads N] [--prompt-tokens 256] [--decode-tokens 128]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/kv/fp16_codec.h"
#include "runtime/model/llama_model.h"
#include "runtime/kv/paged_kv_cache.h"

int main(int argc, char** argv) {
  using namespace vqserve;
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 2, prompt_tokens = 256, decode_tokens = 128;
  bool quantized = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prompt-tokens")) prompt_tokens = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--decode-tokens")) decode_tokens = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--quantized-decode")) quantized = std::atoi(argv[i + 1]) != 0;
  }
  LoadOptions options;
  options.num_threads = threads;
  options.quantized_decode = quantized;
  auto loaded = LlamaModel::Load(model_path, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  LlamaModel& model = **loaded;
  // the same text llama.cpp's side of the benchmark uses, repeated to the prompt length.
  std::string text;
  while (text.size() < size_t(prompt_tokens) * 8) {
    text += "The history of the city is long and full of surprising turns, wars and trade. ";
  }
  std::vector<int32_t> tokens = model.tokenizer().Encode(text, true, false);
  tokens.resize(prompt_tokens);
  const int total = prompt_tokens + decode_tokens + 16;
  auto cache = MakePagedKvCache(MakeFp16Codec(model.kv_shape()), total / 32 + 2, 1);
  std::vector<int32_t> blocks(total / 32 + 2);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = int32_t(i);
  ForwardSeq seq;
  seq.cache = cache.get();
  seq.kv.slot = 0;
  seq.kv.block_table = blocks.data();
  seq.kv.num_blocks = int(blocks.size());
  std::vector<float> logits;
  // warm-up: touch every weight once on both paths.
  seq.tokens = std::span<const int32_t>(tokens.data(), 16);
  model.Forward({&seq, 1}, &logits);
  seq.tokens = std::span<const int32_t>(tokens.data(), 1);
  model.Forward({&seq, 1}, &logits);

  using Clock = std::chrono::steady_clock;
  logits.clear();
  seq.tokens = tokens;
  seq.kv.num_cached = 0;
  const auto t0 = Clock::now();
  model.Forward({&seq, 1}, &logits);
  const auto t1 = Clock::now();
  for (int i = 0; i < decode_tokens; ++i) {
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    tokens.push_back(next);
    seq.tokens = std::span<const int32_t>(&tokens.back(), 1);
    seq.kv.num_cached = int(tokens.size()) - 1;
    logits.clear();
    model.Forward({&seq, 1}, &logits);
  }
  const auto t2 = Clock::now();
  const double prefill = prompt_tokens / std::chrono::duration<double>(t1 - t0).count();
  const double decode = decode_tokens / std::chrono::duration<double>(t2 - t1).count();
  std::printf("{\"engine\": \"vqserve-cpu\", \"threads\": %d, \"prefill_tok_s\": %.1f, "
              "\"decode_tok_s\": %.1f}\n", threads, prefill, decode);
  return 0;
}
