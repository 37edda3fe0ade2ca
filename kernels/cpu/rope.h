#ifndef VQSERVE_KERNELS_CPU_ROPE_H_
#define VQSERVE_KERNELS_CPU_ROPE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vqserve::cpu {

// rotary embedding settings of a model.
struct RopeParams {
  int rope_dim = 0;          // rotated dims per head (even)
  float theta = 10000.0f;    // base
  std::string scaling = "none";  // "none", "linear" or "llama3"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 0;
};

// angular frequency of each rotated pair i (rope_dim / 2 values), scaling applied:
// base^(-2i/rope_dim), divided by `factor` for "linear", smoothly blended for "llama3".
std::vector<float> RopeFrequencies(const RopeParams& params);

// rotates adjacent pairs (2i, 2i+1) of the first rope_dim dims of every head in place by
// angle pos·freq[i] (llama.cpp's "normal" rope, the layout llama gguf files are converted to).
// x is (n, num_heads, head_dim); positions is (n); freqs is (rope_dim / 2).
void ApplyRope(float* x, int n, int num_heads, int head_dim, const int32_t* positions,
               const std::vector<float>& freqs);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_ROPE_H_
