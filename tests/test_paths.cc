#include "tests/test_paths.h"

#include <cstdlib>
#include <filesystem>

namespace vqserve::testing {

std::string SourceDir() { return VQSERVE_SOURCE_DIR; }
std::string BinaryDir() { return VQSERVE_BINARY_DIR; }

std::string DefaultModelPath() {
  if (const char* env = std::getenv("VQSERVE_MODEL")) return env;
  std::string path = SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::exists(path) ? path : "";
}

std::string TestDataPath(const std::string& name) {
  return SourceDir() + "/tests/data/" + name;
}

}  // namespace vqserve::testing
