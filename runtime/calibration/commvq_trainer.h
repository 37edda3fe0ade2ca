#ifndef VQSERVE_RUNTIME_CALIBRATION_COMMVQ_TRAINER_H_
#define VQSERVE_RUNTIME_CALIBRATION_COMMVQ_TRAINER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/calibration/calibration_data.h"
#include "runtime/kv/commvq_codec.h"

namespace vqserve {

// trains commvq codebooks on calibration samples: per layer and kv head, key rounds by em
// on normalized pre-rope keys (runtime/calibration/commvq_em.h), value rounds by residual k-means.
// deterministic for a given options.seed (any num_threads). progress gets one line per
// finished (layer, head) job. sizes of the named configs (CommVqOptionsForName): up to 4096 key
// vectors and 8192 value vectors per (layer, kv head), 16 em steps per key round, 16 lloyd
// iterations per value round; (layer, head) jobs run on num_threads threads.
absl::StatusOr<CommVqCodebooks> TrainCommVq(
    const CalibrationData& data, const CommVqOptions& options,
    const std::function<void(const std::string&)>& progress);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_COMMVQ_TRAINER_H_
