// helpers shared by the fuzz targets: invariant checks, repository paths, loaded tokenizers.
#ifndef VQSERVE_FUZZ_FUZZ_UTIL_H_
#define VQSERVE_FUZZ_FUZZ_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "runtime/gguf/gguf_file.h"
#include "runtime/tokenizer/tokenizer.h"

// aborts (a finding for libfuzzer) when an invariant does not hold.
#define FUZZ_CHECK(cond, what)                                               \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "fuzz invariant failed: %s (%s)\n", #cond, what); \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

namespace vqserve::fuzz {

// a path under the repository root.
inline std::string SourcePath(const std::string& relative) {
  return std::string(VQSERVE_SOURCE_DIR) + "/" + relative;
}

// the tokenizer of the gguf at `relative` (loaded once, kept for the process); aborts if absent.
inline const Tokenizer& LoadTokenizer(const std::string& relative) {
  struct Loaded {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<Tokenizer> tokenizer;
  };
  static auto* loaded = new std::map<std::string, Loaded>();
  auto it = loaded->find(relative);
  if (it != loaded->end()) return *it->second.tokenizer;
  auto file = GgufFile::Open(SourcePath(relative));
  if (!file.ok()) {
    std::fprintf(stderr, "fuzz: %s (run scripts/setup for the default model)\n",
                 file.status().ToString().c_str());
    std::exit(2);
  }
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "fuzz: %s\n", tok.status().ToString().c_str());
    std::exit(2);
  }
  Loaded& l = (*loaded)[relative];
  l.file = std::move(*file);
  l.tokenizer = std::move(*tok);
  return *l.tokenizer;
}

// the default model (byte-level bpe) and the small sentencepiece test vocabulary.
inline constexpr char kBpeModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr char kSpmModel[] = "tests/data/spm_tokenizer.gguf";

}  // namespace vqserve::fuzz

#endif  // VQSERVE_FUZZ_FUZZ_UTIL_H_
