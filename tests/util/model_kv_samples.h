#ifndef VQSERVE_TESTS_UTIL_MODEL_KV_SAMPLES_H_
#define VQSERVE_TESTS_UTIL_MODEL_KV_SAMPLES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/calibration/calibration_data.h"

namespace vqserve::testing {

// a real english text installed by scripts/setup (debian's fortunes); empty when missing.
std::string RealTextPath();

// keys (before and after rope) and values of the default model run over the first `tokens`
// tokens of `text_path`, for the layers listed (data.shape.num_layers = layers.size()).
// computed once, then read back from a cache file in the build directory.
absl::StatusOr<CalibrationData> ModelKvSamples(const std::string& text_path, int tokens,
                                               const std::vector<int>& layers);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_MODEL_KV_SAMPLES_H_
