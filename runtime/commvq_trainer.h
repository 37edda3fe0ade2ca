#ifndef VQSERVE_RUNTIME_COMMVQ_TRAINER_H_
#define VQSERVE_RUNTIME_COMMVQ_TRAINER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/calibration_data.h"
#include "runtime/commvq_codec.h"

namespace vqserve {

// trains commvq codebooks on calibration samples: per layer and kv head, key rounds by em
// on normalized pre-rope keys (runtime/commvq_em.h), value rounds by residual k-means.
// deterministic for a given options.seed and options.num_threads. progress gets one line per
// finished (layer, head) job.
absl::StatusOr<CommVqCodebooks> TrainCommVq(
    const CalibrationData& data, const CommVqOptions& options,
    const std::function<void(const std::string&)>& progress);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_COMMVQ_TRAINER_H_
