#ifndef VQSERVE_TESTS_TEST_PATHS_H_
#define VQSERVE_TESTS_TEST_PATHS_H_

#include <string>

namespace vqserve::testing {

// repository root (where CMakeLists.txt is).
std::string SourceDir();
// the cmake build directory.
std::string BinaryDir();
// path of the embedded default model; empty when models/ lacks it.
std::string DefaultModelPath();
// path of a file under tests/data/.
std::string TestDataPath(const std::string& name);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_TEST_PATHS_H_
