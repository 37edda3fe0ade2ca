#include "kernels/cpu/rope.h"

#include <cmath>

namespace vqserve::cpu {

std::vector<float> RopeFrequencies(const RopeParams& p) {
  const int half = p.rope_dim / 2;
  std::vector<float> freqs(half);
  for (int i = 0; i < half; ++i) {
    double f = std::pow(static_cast<double>(p.theta), -2.0 * i / p.rope_dim);
    if (p.scaling == "linear" && p.factor > 0) {
      f /= p.factor;
    } else if (p.scaling == "llama3" && p.factor > 0 && p.original_context > 0) {
      // wavelengths shorter than ctx/high keep their frequency, longer than ctx/low are divided
      // by the factor, those in between are interpolated linearly in ctx/wavelength.
      const double wavelen = 2.0 * M_PI / f;
      const double low_wavelen = p.original_context / p.low_freq_factor;
      const double high_wavelen = p.original_context / p.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= p.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (p.original_context / wavelen - p.low_freq_factor) /
                              (p.high_freq_factor - p.low_freq_factor);
        f = (1.0 - smooth) * f / p.factor + smooth * f;
      }
    }
    freqs[i] = static_cast<float>(f);
  }
  return freqs;
}

void ApplyRope(float* x, int n, int num_heads, int head_dim, const int32_t* positions,
               const std::vector<float>& freqs) {
  const int half = static_cast<int>(freqs.size());
  std::vector<float> cs(2 * half);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[t]) * freqs[i];
      cs[2 * i] = static_cast<float>(std::cos(angle));
      cs[2 * i + 1] = static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + (static_cast<long>(t) * num_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c - b * s;
        v[2 * i + 1] = a * s + b * c;
      }
    }
  }
}

}  // namespace vqserve::cpu
