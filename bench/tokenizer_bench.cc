// tokenizer throughput on the default model: encode (cold and warm word cache), decode.
// usage (from the repo root): build/bin/tokenizer_bench [--benchmark_filter=...]   (VQSERVE_MODEL overrides the model)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "runtime/gguf/gguf_file.h"
#include "runtime/tokenizer/tokenizer.h"

namespace vqserve {
namespace {

std::string ModelPath() {
  if (const char* env = std::getenv("VQSERVE_MODEL")) return env;
  return "models/SmolLM2-135M-Instruct.Q4_1.gguf";  // run from the repository root
}

// ~1 MB of real english text (debian fortunes when present, else repeated source code).
const std::string& Corpus() {
  static const std::string* corpus = [] {
    std::stringstream ss;
    for (const char* p : {"/usr/share/games/fortunes/fortunes.u8",
                          "/usr/share/games/fortunes/literature.u8",
                          "/usr/share/games/fortunes/computers.u8"}) {
      std::ifstream in(p);
      ss << in.rdbuf();
    }
    std::string s = ss.str();
    if (s.empty()) s = "int main() { return 0; }  // hello, world 12345\n";
    std::string out;
    while (out.size() < (1 << 20)) out += s;
    return new std::string(out.substr(0, 1 << 20));
  }();
  return *corpus;
}

const Tokenizer* Tok() {
  static std::unique_ptr<GgufFile> file;
  static std::unique_ptr<Tokenizer> tok;
  if (!tok) {
    auto f = GgufFile::Open(ModelPath());
    if (!f.ok()) return nullptr;
    file = std::move(*f);
    auto t = Tokenizer::FromGguf(*file);
    if (!t.ok()) return nullptr;
    tok = std::move(*t);
  }
  return tok.get();
}

void BM_EncodeWarm(benchmark::State& state) {
  const Tokenizer* tok = Tok();
  if (tok == nullptr) return state.SkipWithError("model not loadable");
  const std::string& text = Corpus();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text, false, true);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * text.size());
  state.counters["tokens"] = static_cast<double>(n);
}
BENCHMARK(BM_EncodeWarm)->Unit(benchmark::kMillisecond);

void BM_LoadAndEncodeCold(benchmark::State& state) {
  auto file = GgufFile::Open(ModelPath());
  if (!file.ok()) return state.SkipWithError("model not loadable");
  const std::string text = Corpus().substr(0, 1 << 18);
  for (auto _ : state) {
    auto tok = Tokenizer::FromGguf(**file);
    auto ids = (*tok)->Encode(text, false, true);
    benchmark::DoNotOptimize(ids.data());
  }
}
BENCHMARK(BM_LoadAndEncodeCold)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const Tokenizer* tok = Tok();
  if (tok == nullptr) return state.SkipWithError("model not loadable");
  const auto ids = tok->Encode(Corpus(), false, true);
  for (auto _ : state) {
    StreamDecoder dec(*tok);
    size_t bytes = 0;
    for (int32_t id : ids) bytes += dec.Push(id).size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * ids.size());
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vqserve

BENCHMARK_MAIN();
