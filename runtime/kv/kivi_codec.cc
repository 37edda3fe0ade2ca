#include "runtime/kv/kivi_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/gguf/ggml_type.h"

namespace vqserve {

namespace {

constexpr int kGroup = 32;  // channels per value group (and tokens per key group = page)

// writes code q (< 2^bits) as element i of a little-endian packed bit array.
inline void PutCode(uint8_t* dst, int i, int bits, int q) {
  int bit = i * bits;
  dst[bit >> 3] |= static_cast<uint8_t>(q << (bit & 7));
}
inline int GetCode(const uint8_t* src, int i, int bits) {
  int bit = i * bits;
  return (src[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
}

// asymmetric min/max quantization of n values with stride: fp16 min and scale, codes in q.
void QuantizeGroup(const float* x, int n, int stride, int bits, uint16_t* min_h,
                   uint16_t* scale_h, int* q) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i * stride]);
    hi = std::max(hi, x[i * stride]);
  }
  const int levels = (1 << bits) - 1;
  *min_h = FloatToHalf(lo);
  *scale_h = FloatToHalf((hi - lo) / levels);
  const float mn = HalfToFloat(*min_h), sc = HalfToFloat(*scale_h);
  for (int i = 0; i < n; ++i) {
    int c = sc > 0 ? static_cast<int>(std::lround((x[i * stride] - mn) / sc)) : 0;
    q[i] = std::clamp(c, 0, levels);
  }
}

class KiviCodec final : public KvCodec {
 public:
  KiviCodec(const KvShape& shape, int bits) : shape_(shape), bits_(bits) {
    H_ = shape.num_kv_heads;
    D_ = shape.head_dim;
    P_ = page_tokens();
    ng_ = D_ / kGroup;
    kmin_off_ = 0;
    kscale_off_ = kmin_off_ + 2 * H_ * D_;
    vmin_off_ = kscale_off_ + 2 * H_ * D_;
    vscale_off_ = vmin_off_ + 2 * H_ * P_ * ng_;
    kcode_off_ = vscale_off_ + 2 * H_ * P_ * ng_;
    vcode_off_ = kcode_off_ + H_ * D_ * P_ * bits_ / 8;
    bytes_ = vcode_off_ + H_ * P_ * D_ * bits_ / 8;
  }

  std::string name() const override { return absl::StrCat("kivi-k", bits_, "v", bits_); }
  const KvShape& shape() const override { return shape_; }
  size_t LayerPageBytes() const override { return bytes_; }

  void EncodePage(int layer, int first_pos, const float* k, const float* v,
                  uint8_t* dst) const override {
    std::memset(dst, 0, bytes_);
    uint16_t* kmin = Half(dst, kmin_off_);
    uint16_t* kscale = Half(dst, kscale_off_);
    uint16_t* vmin = Half(dst, vmin_off_);
    uint16_t* vscale = Half(dst, vscale_off_);
    std::vector<int> q(std::max(P_, kGroup));
    const int row = H_ * D_;  // stride between tokens in k/v
    for (int h = 0; h < H_; ++h) {
      for (int c = 0; c < D_; ++c) {
        QuantizeGroup(k + h * D_ + c, P_, row, bits_, &kmin[h * D_ + c], &kscale[h * D_ + c], q.data());
        uint8_t* codes = dst + kcode_off_ + static_cast<size_t>(h * D_ + c) * P_ * bits_ / 8;
        for (int t = 0; t < P_; ++t) PutCode(codes, t, bits_, q[t]);
      }
      for (int t = 0; t < P_; ++t) {
        uint8_t* codes = dst + vcode_off_ + static_cast<size_t>(h * P_ + t) * D_ * bits_ / 8;
        for (int g = 0; g < ng_; ++g) {
          int at = (h * P_ + t) * ng_ + g;
          QuantizeGroup(v + static_cast<size_t>(t) * row + h * D_ + g * kGroup, kGroup, 1, bits_,
                        &vmin[at], &vscale[at], q.data());
          for (int i = 0; i < kGroup; ++i) PutCode(codes, g * kGroup + i, bits_, q[i]);
        }
      }
    }
  }

  void AttendPagesFrom(int layer, const uint8_t* const* pages, int first_pos, int num_tokens,
                       const float* q, int q_pos, SoftmaxState* state) const override {
    if (num_tokens <= 0) return;
    const int group = shape_.num_heads / H_;
    const float inv = 1.0f / std::sqrt(static_cast<float>(D_));
    const int num_pages = (num_tokens + P_ - 1) / P_;
    thread_local std::vector<float> scores, qs, vrow;
    scores.resize(num_tokens);
    qs.resize(D_);
    vrow.resize(D_);
    for (int qh = 0; qh < shape_.num_heads; ++qh) {
      const int h = qh / group;
      const float* qv = q + static_cast<size_t>(qh) * D_;
      float smax = -std::numeric_limits<float>::infinity();
      // s_t = sum_c q_c min_c + sum_c (q_c scale_c) code_ct, codes read channel by channel.
      for (int j = 0; j < num_pages; ++j) {
        const uint8_t* page = pages[j];
        const uint16_t* kmin = Half(page, kmin_off_) + h * D_;
        const uint16_t* kscale = Half(page, kscale_off_) + h * D_;
        const int n = std::min(P_, num_tokens - j * P_);
        float base = 0;
        float* s = scores.data() + j * P_;
        std::fill(s, s + n, 0.0f);
        for (int c = 0; c < D_; ++c) {
          base += qv[c] * HalfToFloat(kmin[c]);
          const float w = qv[c] * HalfToFloat(kscale[c]);
          const uint8_t* codes = page + kcode_off_ + static_cast<size_t>(h * D_ + c) * P_ * bits_ / 8;
          for (int t = 0; t < n; ++t) s[t] += w * GetCode(codes, t, bits_);
        }
        for (int t = 0; t < n; ++t) {
          s[t] = (s[t] + base) * inv;
          smax = std::max(smax, s[t]);
        }
      }
      const float m_old = state->m[qh];
      const float m_new = std::max(m_old, smax);
      const float alpha = std::exp(m_old - m_new);
      float* acc = state->acc + static_cast<size_t>(qh) * D_;
      for (int i = 0; i < D_; ++i) acc[i] *= alpha;
      float sum = 0;
      for (int t = 0; t < num_tokens; ++t) {
        const float p = std::exp(scores[t] - m_new);
        sum += p;
        const uint8_t* page = pages[t / P_];
        const int tt = t % P_;
        const uint16_t* vmin = Half(page, vmin_off_) + (h * P_ + tt) * ng_;
        const uint16_t* vscale = Half(page, vscale_off_) + (h * P_ + tt) * ng_;
        const uint8_t* codes = page + vcode_off_ + static_cast<size_t>(h * P_ + tt) * D_ * bits_ / 8;
        for (int g = 0; g < ng_; ++g) {
          const float mn = p * HalfToFloat(vmin[g]), sc = p * HalfToFloat(vscale[g]);
          for (int i = g * kGroup; i < (g + 1) * kGroup; ++i) acc[i] += mn + sc * GetCode(codes, i, bits_);
        }
      }
      state->m[qh] = m_new;
      state->l[qh] = state->l[qh] * alpha + sum;
    }
  }

  void DecodePage(int layer, int first_pos, const uint8_t* src, float* k_rope,
                  float* v) const override {
    const uint16_t* kmin = Half(src, kmin_off_);
    const uint16_t* kscale = Half(src, kscale_off_);
    const uint16_t* vmin = Half(src, vmin_off_);
    const uint16_t* vscale = Half(src, vscale_off_);
    const int row = H_ * D_;
    for (int h = 0; h < H_; ++h) {
      for (int c = 0; c < D_; ++c) {
        const uint8_t* codes = src + kcode_off_ + static_cast<size_t>(h * D_ + c) * P_ * bits_ / 8;
        const float mn = HalfToFloat(kmin[h * D_ + c]), sc = HalfToFloat(kscale[h * D_ + c]);
        for (int t = 0; t < P_; ++t) k_rope[t * row + h * D_ + c] = mn + sc * GetCode(codes, t, bits_);
      }
      for (int t = 0; t < P_; ++t) {
        const uint8_t* codes = src + vcode_off_ + static_cast<size_t>(h * P_ + t) * D_ * bits_ / 8;
        for (int c = 0; c < D_; ++c) {
          int at = (h * P_ + t) * ng_ + c / kGroup;
          v[t * row + h * D_ + c] = HalfToFloat(vmin[at]) + HalfToFloat(vscale[at]) * GetCode(codes, c, bits_);
        }
      }
    }
  }

 private:
  static uint16_t* Half(uint8_t* p, size_t off) { return reinterpret_cast<uint16_t*>(p + off); }
  static const uint16_t* Half(const uint8_t* p, size_t off) {
    return reinterpret_cast<const uint16_t*>(p + off);
  }

  KvShape shape_;
  int bits_;
  int H_ = 0, D_ = 0, P_ = 0, ng_ = 0;
  size_t kmin_off_ = 0, kscale_off_ = 0, vmin_off_ = 0, vscale_off_ = 0, kcode_off_ = 0,
         vcode_off_ = 0, bytes_ = 0;
};

}  // namespace

std::unique_ptr<KvCodec> MakeKiviCodec(const KvShape& shape, int bits) {
  return std::make_unique<KiviCodec>(shape, bits);
}

}  // namespace vqserve
