// helpers shared by the fuzz targets: invariant checks, repository paths, loaded tokenizers.
#ifndef VQSERVE_FUZZ_FUZZ_UTIL_H_
#define VQSERVE_FUZZ_FUZZ_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// the tokenizer of the gguf at `relative` (loaded once, kept for the process). exits when it
// cannot be loaded: 77 (what the replay ctests read as skipped) when the file is missing on a
// machine without scripts/setup's model, 2 under CI (variable CI set) or for any other error.
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
    const bool missing = !std::ifstream(SourcePath(relative)).good();
    std::exit(missing && std::getenv("CI") == nullptr ? 77 : 2);
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
