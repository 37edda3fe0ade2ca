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
  // (num_kv_heads, head_dim, head_dim) mean q q^T over the queries of each kv head's group at
  // the recorded tokens (post-rope); empty unless the recorder was asked for queries.
  std::vector<double> q_moment;
};

// samples of every layer, collected by running the model over calibration text.
struct CalibrationData {
  KvShape shape;
  float rope_theta = 10000.0f;
  // the model's rope frequencies (rope_dim / 2; pair i rotates dims 2i, 2i + 1) and context
  // length: vecinfer -pca trains on keys shifted to positions spread over the context.
  std::vector<float> rope_freqs;
  int context_length = 0;
  std::vector<LayerSamples> layers;  // num_layers
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_DATA_H_
