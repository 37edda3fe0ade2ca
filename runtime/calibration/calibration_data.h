#ifndef VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_DATA_H_
#define VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_DATA_H_

#include <cstdint>
#include <vector>

#include "runtime/kv/kv_cache.h"

namespace vqserve {

// keys and values of one layer collected from real text for codebook training.
// each array is (num_tokens, num_kv_heads, head_dim) fp32, token-major.
struct LayerSamples {
  std::vector<float> k_pre_rope;
  std::vector<float> k_rope;
  std::vector<float> v;
  std::vector<int32_t> positions;  // (num_tokens) rope position of each sample
  int num_tokens = 0;
};

// samples of every layer, collected by running the model over calibration text.
struct CalibrationData {
  KvShape shape;
  float rope_theta = 10000.0f;
  std::vector<LayerSamples> layers;  // num_layers
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_DATA_H_
