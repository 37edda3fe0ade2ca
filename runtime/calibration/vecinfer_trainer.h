#ifndef VQSERVE_RUNTIME_CALIBRATION_VECINFER_TRAINER_H_
#define VQSERVE_RUNTIME_CALIBRATION_VECINFER_TRAINER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/calibration/calibration_data.h"
#include "runtime/kv/vecinfer_codec.h"

namespace vqserve {

// fits the smoothing factors lambda_i = sqrt(max_t |K[t,i]|) per layer and kv head on post-rope
// keys, then trains one k-means codebook per layer (or kv head) and sub-space for transformed
// keys and for values. with options.key_pca the keys' transform and sub-vector sizes come from
// FitKeyPca / SplitAxes per kv head instead, which needs data's q_moment. deterministic for options.seed. progress gets one line per layer.
absl::StatusOr<VecInferCodebooks> TrainVecInfer(
    const CalibrationData& data, const VecInferOptions& options,
    const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_VECINFER_TRAINER_H_
