// replays saved inputs through a fuzz target without libfuzzer: the normal (gcc) build links
// each fuzz/*_fuzzer.cc with this main, and ctest runs it over the target's seed corpus and its
// regression inputs (label fuzz). the targets' invariants abort on a violation, so a replay that
// returns is a pass.
//   <target>_replay PATH...   (a directory: every regular file in it, sorted by name)
// exits 0 after running every input, 1 when a path cannot be read or no input was found.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// the files `path` names: itself, or the regular files of a directory in name order.
bool ListInputs(const std::filesystem::path& path, std::vector<std::filesystem::path>* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (ec) return false;
    std::sort(files.begin(), files.end());
    out->insert(out->end(), files.begin(), files.end());
    return true;
  }
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  out->push_back(path);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!ListInputs(argv[i], &inputs)) {
      std::fprintf(stderr, "replay: %s: not a readable file or directory\n", argv[i]);
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s PATH...)\n", argv[0]);
    return 1;
  }
  size_t bytes = 0;
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: %s: read failed\n", path.c_str());
      return 1;
    }
    std::printf("replay: %s\n", path.c_str());
    std::fflush(stdout);  // a failing input is the last one named
    // what libfuzzer would pass for an empty file: a valid pointer, size 0.
    static const uint8_t kEmpty = 0;
    LLVMFuzzerTestOneInput(data.empty() ? &kEmpty : data.data(), data.size());
    bytes += data.size();
  }
  std::printf("replay: %zu inputs (%zu bytes) ran, no invariant failed\n", inputs.size(), bytes);
  return 0;
}
