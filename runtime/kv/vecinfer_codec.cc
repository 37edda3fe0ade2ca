#include "runtime/kv/vecinfer_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/kmeans.h"

namespace vqserve {

absl::StatusOr<PqSpec> PqSpecForBits(float bits) {
  if (bits == 4.0f) return PqSpec{8, 2};
  if (bits == 3.0f) return PqSpec{12, 4};
  if (bits == 2.0f) return PqSpec{8, 4};
  if (bits == 1.5f) return PqSpec{12, 8};
  if (bits == 1.0f) return PqSpec{8, 8};
  return absl::InvalidArgumentError(
      absl::StrFormat("vecinfer: unsupported bit width %g (use 4, 3, 2, 1.5 or 1)", bits));
}

absl::StatusOr<VecInferSide> VecInferSideGeometry(float bits, bool pca, int head_dim) {
  if (!kernels::IsPowerOfTwo(head_dim)) {
    return absl::InvalidArgumentError(absl::StrFormat("vecinfer: head_dim %d is not a power of two", head_dim));
  }
  if (pca) {
    const float m = head_dim * bits / 8;
    if (!(m >= 1 && m <= head_dim && m == std::floor(m))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "vecinfer: %g bits over head_dim %d is not a whole number of 8-bit codes (1 to %d)", bits, head_dim,
          head_dim));
    }
    return VecInferSide{8, static_cast<int>(m)};
  }
  auto spec = PqSpecForBits(bits);
  if (!spec.ok()) return spec.status();
  if (head_dim % spec->sub_dim != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vecinfer: head_dim %d is not divisible by the sub-vector size %d", head_dim, spec->sub_dim));
  }
  return VecInferSide{spec->code_bits, head_dim / spec->sub_dim};
}

namespace {

std::string BitsText(float bits) {
  if (bits == std::floor(bits)) return absl::StrFormat("%d", static_cast<int>(bits));
  return absl::StrFormat("%g", bits);
}

// 8-bit codes are one byte each; 12-bit codes go two to three bytes (c0 | c1 << 12).
void PackCodes(const uint16_t* codes, int count, int bits, uint8_t* dst) {
  if (bits == 8) {
    for (int i = 0; i < count; ++i) dst[i] = static_cast<uint8_t>(codes[i]);
    return;
  }
  for (int i = 0; i < count; i += 2) {
    uint32_t w = codes[i] | (static_cast<uint32_t>(codes[i + 1]) << 12);
    dst[0] = w & 0xff;
    dst[1] = (w >> 8) & 0xff;
    dst[2] = (w >> 16) & 0xff;
    dst += 3;
  }
}

void UnpackCodes(const uint8_t* src, int count, int bits, uint16_t* codes) {
  if (bits == 8) {
    for (int i = 0; i < count; ++i) codes[i] = src[i];
    return;
  }
  for (int i = 0; i < count; i += 2) {
    uint32_t w = src[0] | (static_cast<uint32_t>(src[1]) << 8) | (static_cast<uint32_t>(src[2]) << 16);
    codes[i] = w & 0xfff;
    codes[i + 1] = (w >> 12) & 0xfff;
    src += 3;
  }
}

std::string FloatsToBlob(const std::vector<float>& v) {
  std::string out(v.size() * sizeof(float), '\0');
  std::memcpy(out.data(), v.data(), out.size());  // x86-64: little-endian
  return out;
}

class VecInferCodec final : public KvCodec {
 public:
  explicit VecInferCodec(std::shared_ptr<const VecInferCodebooks> cb)
      : cb_(std::move(cb)), shape_(cb_->shape) {
    const auto& o = cb_->options;
    D_ = shape_.head_dim;
    H_ = shape_.num_kv_heads;
    G_ = o.per_head ? H_ : 1;
    GK_ = o.key_pca ? H_ : G_;
    const VecInferSide ks = *VecInferSideGeometry(o.k_bits, o.key_pca, D_);  // FromBlobs checked it
    kspec_ = PqSpec{ks.code_bits, o.key_pca ? 0 : D_ / ks.subvectors};  // -pca: sizes from k_dims
    vspec_ = *PqSpecForBits(o.v_bits);
    mk_ = ks.subvectors;
    mv_ = D_ / vspec_.sub_dim;
    nk_ = 1 << kspec_.code_bits;
    nv_ = 1 << vspec_.code_bits;
    k_row_bytes_ = mk_ * kspec_.code_bits / 8;
    v_row_bytes_ = mv_ * vspec_.code_bits / 8;
    for (int l = 0; l < shape_.num_layers; ++l) {
      for (int g = 0; g < GK_; ++g) {
        int off = 0;
        for (int m = 0; m < mk_; ++m) {
          const int d = o.key_pca ? cb_->k_dims[(static_cast<size_t>(l) * GK_ + g) * mk_ + m] : kspec_.sub_dim;
          k_off_.push_back(off);
          k_dim_.push_back(d);
          k_index_.emplace_back(KCentroids(l, g) + static_cast<size_t>(off) * nk_, nk_, d);
          off += d;
        }
      }
      for (int g = 0; g < G_; ++g) {
        for (int m = 0; m < mv_; ++m) {
          v_index_.emplace_back(VCentroids(l, g) + static_cast<size_t>(m) * nv_ * vspec_.sub_dim, nv_,
                                vspec_.sub_dim);
        }
      }
    }
  }

  std::string name() const override { return VecInferCodecName(cb_->options); }
  const KvShape& shape() const override { return shape_; }
  size_t LayerPageBytes() const override {
    return static_cast<size_t>(H_) * page_tokens() * (k_row_bytes_ + v_row_bytes_);
  }
  size_t FixedBytes() const override {
    return (cb_->lambda.size() + cb_->k_centroids.size() + cb_->v_centroids.size() + cb_->k_mean.size() +
            cb_->k_transform.size() + cb_->k_inverse.size()) * sizeof(float) +
           cb_->k_dims.size() * sizeof(int32_t);
  }

  void EncodePage(int layer, int first_pos, const float* k, const float* v,
                  uint8_t* dst) const override {
    const int P = page_tokens();
    std::vector<float> x(D_);
    std::vector<uint16_t> codes(std::max(mk_, mv_));
    uint8_t* kdst = dst;
    uint8_t* vdst = dst + static_cast<size_t>(H_) * P * k_row_bytes_;
    for (int h = 0; h < H_; ++h) {
      const int g = o_per_head() ? h : 0;
      const int gk = KGroup(h);
      for (int t = 0; t < P; ++t) {
        const float* kin = k + (static_cast<size_t>(t) * H_ + h) * D_;
        TransformKey(layer, h, kin, x.data());
        for (int m = 0; m < mk_; ++m) {
          codes[m] = static_cast<uint16_t>(KIndex(layer, gk, m).Nearest(x.data() + KOff(layer, gk, m)));
        }
        PackCodes(codes.data(), mk_, kspec_.code_bits, kdst + (static_cast<size_t>(h) * P + t) * k_row_bytes_);
        const float* vin = v + (static_cast<size_t>(t) * H_ + h) * D_;
        for (int m = 0; m < mv_; ++m) {
          codes[m] = static_cast<uint16_t>(VIndex(layer, g, m).Nearest(vin + m * vspec_.sub_dim));
        }
        PackCodes(codes.data(), mv_, vspec_.code_bits, vdst + (static_cast<size_t>(h) * P + t) * v_row_bytes_);
      }
    }
  }

  void AttendPagesFrom(int layer, const uint8_t* const* pages, int first_pos, int num_tokens,
                       const float* q, int q_pos, SoftmaxState* state) const override {
    if (num_tokens <= 0) return;
    const int P = page_tokens();
    const int group = shape_.num_heads / H_;
    const int dv = vspec_.sub_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D_));
    thread_local std::vector<uint16_t> kcodes, vcodes;
    thread_local std::vector<float> lut, scores, psum, qt, out;
    kcodes.resize(static_cast<size_t>(num_tokens) * mk_);
    vcodes.resize(static_cast<size_t>(num_tokens) * mv_);
    lut.resize(static_cast<size_t>(mk_) * nk_);
    scores.resize(num_tokens);
    psum.resize(static_cast<size_t>(mv_) * nv_);
    qt.resize(D_);
    out.resize(D_);
    const int num_pages = (num_tokens + P - 1) / P;
    for (int h = 0; h < H_; ++h) {
      const int g = o_per_head() ? h : 0;
      // codes of this kv head, token-major (codes, not dequantized vectors).
      for (int j = 0; j < num_pages; ++j) {
        int n = std::min(P, num_tokens - j * P);
        const uint8_t* ksrc = pages[j] + static_cast<size_t>(h) * P * k_row_bytes_;
        const uint8_t* vsrc = pages[j] + static_cast<size_t>(H_) * P * k_row_bytes_ +
                              static_cast<size_t>(h) * P * v_row_bytes_;
        for (int t = 0; t < n; ++t) {
          UnpackCodes(ksrc + t * k_row_bytes_, mk_, kspec_.code_bits,
                      kcodes.data() + (static_cast<size_t>(j) * P + t) * mk_);
          UnpackCodes(vsrc + t * v_row_bytes_, mv_, vspec_.code_bits,
                      vcodes.data() + (static_cast<size_t>(j) * P + t) * mv_);
        }
      }
      const int gk = KGroup(h);
      const float* ck = KCentroids(layer, gk);
      const float* cv = VCentroids(layer, g);
      for (int r = 0; r < group; ++r) {
        const int qh = h * group + r;
        // q . k^ = q~ . y^ + bias (bias = q . mean with key_pca, else 0)
        const float bias = TransformQuery(layer, h, q + static_cast<size_t>(qh) * D_, qt.data()) * scale;
        // lut[m][c] = q~_m . Ck[m][c] / sqrt(D)
        for (int m = 0; m < mk_; ++m) {
          const int dk = KDim(layer, gk, m), off = KOff(layer, gk, m);
          const float* qm = qt.data() + off;
          const float* c = ck + static_cast<size_t>(off) * nk_;
          float* row = lut.data() + static_cast<size_t>(m) * nk_;
          for (int e = 0; e < nk_; ++e) {
            float s = 0;
            for (int j = 0; j < dk; ++j) s += qm[j] * c[e * dk + j];
            row[e] = s * scale;
          }
        }
        float smax = -std::numeric_limits<float>::infinity();
        for (int t = 0; t < num_tokens; ++t) {
          const uint16_t* code = kcodes.data() + static_cast<size_t>(t) * mk_;
          float s = bias;
          for (int m = 0; m < mk_; ++m) s += lut[static_cast<size_t>(m) * nk_ + code[m]];
          scores[t] = s;
          smax = std::max(smax, s);
        }
        const float m_old = state->m[qh];
        const float m_new = std::max(m_old, smax);
        const float alpha = std::exp(m_old - m_new);  // 0 when m_old is -inf
        std::fill(psum.begin(), psum.end(), 0.0f);
        float sum = 0;
        for (int t = 0; t < num_tokens; ++t) {
          float p = std::exp(scores[t] - m_new);
          sum += p;
          const uint16_t* code = vcodes.data() + static_cast<size_t>(t) * mv_;
          for (int m = 0; m < mv_; ++m) psum[static_cast<size_t>(m) * nv_ + code[m]] += p;
        }
        // o_m = sum_c P[m][c] Cv[m][c]
        for (int m = 0; m < mv_; ++m) {
          float* om = out.data() + m * dv;
          std::fill(om, om + dv, 0.0f);
          const float* pm = psum.data() + static_cast<size_t>(m) * nv_;
          const float* c = cv + static_cast<size_t>(m) * nv_ * dv;
          for (int e = 0; e < nv_; ++e) {
            float p = pm[e];
            if (p == 0.0f) continue;
            for (int j = 0; j < dv; ++j) om[j] += p * c[e * dv + j];
          }
        }
        state->m[qh] = m_new;
        state->l[qh] = state->l[qh] * alpha + sum;
        float* acc = state->acc + static_cast<size_t>(qh) * D_;
        for (int i = 0; i < D_; ++i) acc[i] = acc[i] * alpha + out[i];
      }
    }
  }

  void DecodePage(int layer, int first_pos, const uint8_t* src, float* k_rope,
                  float* v) const override {
    const int P = page_tokens();
    std::vector<uint16_t> codes(std::max(mk_, mv_));
    const uint8_t* vsrc = src + static_cast<size_t>(H_) * P * k_row_bytes_;
    const int dv = vspec_.sub_dim;
    std::vector<float> y(D_);
    for (int h = 0; h < H_; ++h) {
      const int g = o_per_head() ? h : 0;
      const int gk = KGroup(h);
      const float* ck = KCentroids(layer, gk);
      const float* cv = VCentroids(layer, g);
      for (int t = 0; t < P; ++t) {
        float* kout = k_rope + (static_cast<size_t>(t) * H_ + h) * D_;
        UnpackCodes(src + (static_cast<size_t>(h) * P + t) * k_row_bytes_, mk_, kspec_.code_bits, codes.data());
        for (int m = 0; m < mk_; ++m) {
          const int dk = KDim(layer, gk, m), off = KOff(layer, gk, m);
          std::memcpy(y.data() + off, ck + static_cast<size_t>(off) * nk_ + codes[m] * dk, dk * sizeof(float));
        }
        UntransformKey(layer, h, y.data(), kout);
        float* vout = v + (static_cast<size_t>(t) * H_ + h) * D_;
        UnpackCodes(vsrc + (static_cast<size_t>(h) * P + t) * v_row_bytes_, mv_, vspec_.code_bits, codes.data());
        for (int m = 0; m < mv_; ++m) {
          std::memcpy(vout + m * dv, cv + (static_cast<size_t>(m) * nv_ + codes[m]) * dv, dv * sizeof(float));
        }
      }
    }
  }

 private:
  bool o_per_head() const { return cb_->options.per_head; }
  bool o_pca() const { return cb_->options.key_pca; }
  int KGroup(int h) const { return GK_ == H_ ? h : 0; }
  const float* KCentroids(int layer, int g) const {
    return cb_->k_centroids.data() + (static_cast<size_t>(layer) * GK_ + g) * nk_ * D_;
  }
  // sub-vector m of key group g: dims [KOff, KOff + KDim) of the transformed key; its codebook
  // (nk, KDim) starts at KCentroids + nk * KOff.
  int KOff(int layer, int g, int m) const { return k_off_[(static_cast<size_t>(layer) * GK_ + g) * mk_ + m]; }
  int KDim(int layer, int g, int m) const { return k_dim_[(static_cast<size_t>(layer) * GK_ + g) * mk_ + m]; }
  size_t HeadAt(int layer, int h) const { return static_cast<size_t>(layer) * H_ + h; }
  const float* VCentroids(int layer, int g) const {
    return cb_->v_centroids.data() + (static_cast<size_t>(layer) * G_ + g) * mv_ * nv_ * vspec_.sub_dim;
  }
  const kernels::NearestCentroidIndex& KIndex(int layer, int g, int m) const {
    return k_index_[(static_cast<size_t>(layer) * GK_ + g) * mk_ + m];
  }
  const kernels::NearestCentroidIndex& VIndex(int layer, int g, int m) const {
    return v_index_[(static_cast<size_t>(layer) * G_ + g) * mv_ + m];
  }
  // k~ = H (k / lambda); with key_pca k~ = (k - mean) T.
  void TransformKey(int layer, int h, const float* k, float* out) const {
    if (o_pca()) {
      PcaTransformKey(*cb_, layer, h, k, out);
      return;
    }
    const float* lam = cb_->lambda.data() + HeadAt(layer, h) * D_;
    for (int i = 0; i < D_; ++i) out[i] = k[i] / lam[i];
    if (cb_->options.hadamard) kernels::FastWalshHadamard(out, D_);
  }
  // inverse of TransformKey: k = lambda * H k~ (H is its own inverse); with key_pca
  // k = mean + k~ T^-1.
  void UntransformKey(int layer, int h, const float* y, float* k) const {
    if (o_pca()) {
      const float* mean = cb_->k_mean.data() + HeadAt(layer, h) * D_;
      const float* inv = cb_->k_inverse.data() + HeadAt(layer, h) * D_ * D_;
      std::copy(mean, mean + D_, k);
      for (int j = 0; j < D_; ++j) {
        for (int i = 0; i < D_; ++i) k[i] += y[j] * inv[j * D_ + i];
      }
      return;
    }
    const float* lam = cb_->lambda.data() + HeadAt(layer, h) * D_;
    std::copy(y, y + D_, k);
    if (cb_->options.hadamard) kernels::FastWalshHadamard(k, D_);
    for (int i = 0; i < D_; ++i) k[i] *= lam[i];
  }
  // q~ = H (q * lambda), so q~ . k~ = q . k; with key_pca q~ = T^-1 q, so q~ . k~ + q . mean =
  // q . k. returns the part of the score that does not depend on the code (q . mean, or 0).
  float TransformQuery(int layer, int h, const float* q, float* out) const {
    if (o_pca()) {
      const float* mean = cb_->k_mean.data() + HeadAt(layer, h) * D_;
      const float* inv = cb_->k_inverse.data() + HeadAt(layer, h) * D_ * D_;
      float bias = 0;
      for (int i = 0; i < D_; ++i) bias += q[i] * mean[i];
      for (int j = 0; j < D_; ++j) {
        float s = 0;
        for (int i = 0; i < D_; ++i) s += inv[j * D_ + i] * q[i];
        out[j] = s;
      }
      return bias;
    }
    const float* lam = cb_->lambda.data() + HeadAt(layer, h) * D_;
    for (int i = 0; i < D_; ++i) out[i] = q[i] * lam[i];
    if (cb_->options.hadamard) kernels::FastWalshHadamard(out, D_);
    return 0.0f;
  }

  std::shared_ptr<const VecInferCodebooks> cb_;
  KvShape shape_;
  PqSpec kspec_, vspec_;
  int D_ = 0, H_ = 0, G_ = 1, GK_ = 1, mk_ = 0, mv_ = 0, nk_ = 0, nv_ = 0;
  int k_row_bytes_ = 0, v_row_bytes_ = 0;
  std::vector<int> k_off_, k_dim_;  // (layers, GK, mk) key sub-vector offsets and sizes
  std::vector<kernels::NearestCentroidIndex> k_index_, v_index_;
};

}  // namespace

void PcaTransformKey(const VecInferCodebooks& cb, int layer, int h, const float* k, float* y) {
  const int D = cb.shape.head_dim;
  const size_t at = static_cast<size_t>(layer) * cb.shape.num_kv_heads + h;
  const float* mean = cb.k_mean.data() + at * D;
  const float* t = cb.k_transform.data() + at * D * D;
  std::fill(y, y + D, 0.0f);
  for (int i = 0; i < D; ++i) {
    const float c = k[i] - mean[i];
    for (int j = 0; j < D; ++j) y[j] += c * t[i * D + j];
  }
}

std::string VecInferCodecName(const VecInferOptions& o) {
  std::string name = absl::StrCat("vecinfer-k", BitsText(o.k_bits), "v", BitsText(o.v_bits));
  if (!o.smoothing) name += "-nosmooth";
  if (!o.hadamard) name += "-nohadamard";
  if (o.per_head) name += "-perhead";
  if (o.key_pca) name += "-pca";
  return name;
}

absl::StatusOr<VecInferOptions> VecInferOptionsForName(const std::string& name) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("codec '", name, "': ", why));
  };
  std::vector<std::string> parts = absl::StrSplit(name, '-');
  if (parts.size() < 2 || parts[0] != "vecinfer") return bad("not a vecinfer codec name");
  const std::string& kv = parts[1];
  size_t vpos = kv.find('v');
  if (kv.empty() || kv[0] != 'k' || vpos == std::string::npos) return bad("expected kXvY bit widths");
  VecInferOptions o;
  if (!absl::SimpleAtof(kv.substr(1, vpos - 1), &o.k_bits) ||
      !absl::SimpleAtof(kv.substr(vpos + 1), &o.v_bits)) {
    return bad("bad bit widths");
  }
  for (size_t i = 2; i < parts.size(); ++i) {
    if (parts[i] == "nosmooth") {
      o.smoothing = false;
    } else if (parts[i] == "nohadamard") {
      o.hadamard = false;
    } else if (parts[i] == "perhead") {
      o.per_head = true;
    } else if (parts[i] == "pca") {
      o.key_pca = true;
    } else {
      return bad(absl::StrCat("unknown option '", parts[i], "'"));
    }
  }
  if (o.key_pca && (!o.smoothing || !o.hadamard)) return bad("-pca replaces smoothing and hadamard");
  // -pca keys take any width that is a whole number of 8-bit codes a head (checked against
  // head_dim when the codebooks are made or read); the rest the product-quantizer table's.
  const bool k_ok = o.key_pca ? o.k_bits > 0 && o.k_bits <= 8 : PqSpecForBits(o.k_bits).ok();
  if (!k_ok || !PqSpecForBits(o.v_bits).ok()) {
    return bad("bit widths must be 4, 3, 2, 1.5 or 1 (-pca keys: a whole number of 8-bit codes a head)");
  }
  return o;
}

std::map<std::string, std::string> VecInferCodebooks::ToBlobs() const {
  std::map<std::string, std::string> blobs = {{"lambda", FloatsToBlob(lambda)},
                                              {"k_centroids", FloatsToBlob(k_centroids)},
                                              {"v_centroids", FloatsToBlob(v_centroids)}};
  if (options.key_pca) {
    blobs["k_mean"] = FloatsToBlob(k_mean);
    blobs["k_transform"] = FloatsToBlob(k_transform);
    blobs["k_inverse"] = FloatsToBlob(k_inverse);
    std::string dims(k_dims.size() * sizeof(int32_t), '\0');
    std::memcpy(dims.data(), k_dims.data(), dims.size());
    blobs["k_dims"] = std::move(dims);
  }
  return blobs;
}

absl::StatusOr<VecInferCodebooks> VecInferCodebooks::FromBlobs(
    const KvShape& shape, const VecInferOptions& options,
    const std::map<std::string, std::string>& blobs) {
  auto ks = VecInferSideGeometry(options.k_bits, options.key_pca, shape.head_dim);
  if (!ks.ok()) return ks.status();
  auto vs = VecInferSideGeometry(options.v_bits, false, shape.head_dim);
  if (!vs.ok()) return vs.status();
  VecInferCodebooks cb;
  cb.options = options;
  cb.shape = shape;
  const size_t g = options.per_head ? shape.num_kv_heads : 1;
  const size_t gk = options.key_pca ? shape.num_kv_heads : g;
  const size_t heads = static_cast<size_t>(shape.num_layers) * shape.num_kv_heads;
  const size_t D = shape.head_dim;
  const size_t k_n = shape.num_layers * gk * D * (size_t{1} << ks->code_bits);
  const size_t v_n = shape.num_layers * g * D * (size_t{1} << vs->code_bits);
  auto take = [&](const char* name, size_t n, void* dst) -> absl::Status {
    auto it = blobs.find(name);
    if (it == blobs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("vecinfer codebooks lack blob '", name, "'"));
    }
    if (it->second.size() != n * 4) {
      return absl::InvalidArgumentError(
          absl::StrFormat("vecinfer blob '%s' has %d bytes, expected %d", name, it->second.size(), n * 4));
    }
    std::memcpy(dst, it->second.data(), it->second.size());
    return absl::OkStatus();
  };
  struct Want {
    const char* name;
    size_t n;
    std::vector<float>* dst;
  };
  std::vector<Want> wants = {{"lambda", heads * D, &cb.lambda}, {"k_centroids", k_n, &cb.k_centroids},
                             {"v_centroids", v_n, &cb.v_centroids}};
  if (options.key_pca) {
    wants.push_back({"k_mean", heads * D, &cb.k_mean});
    wants.push_back({"k_transform", heads * D * D, &cb.k_transform});
    wants.push_back({"k_inverse", heads * D * D, &cb.k_inverse});
  }
  for (const Want& w : wants) {
    w.dst->resize(w.n);
    if (absl::Status st = take(w.name, w.n, w.dst->data()); !st.ok()) return st;
    for (float x : *w.dst) {
      if (!std::isfinite(x)) {
        return absl::InvalidArgumentError(absl::StrCat("vecinfer blob '", w.name, "' holds a non-finite value"));
      }
    }
  }
  for (float l : cb.lambda) {
    if (!(l > 0)) return absl::InvalidArgumentError("vecinfer lambda not positive");
  }
  if (options.key_pca) {
    const int mk = ks->subvectors;
    cb.k_dims.resize(heads * mk);
    if (absl::Status st = take("k_dims", cb.k_dims.size(), cb.k_dims.data()); !st.ok()) return st;
    for (size_t at = 0; at < cb.k_dims.size(); at += mk) {
      int64_t sum = 0;
      bool positive = true;
      for (int m = 0; m < mk; ++m) {
        positive = positive && cb.k_dims[at + m] >= 1;
        sum += cb.k_dims[at + m];
      }
      if (!positive || sum != shape.head_dim) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "vecinfer blob 'k_dims': the sub-vector sizes of head %d are not positive with sum head_dim %d", at / mk,
            shape.head_dim));
      }
    }
  }
  return cb;
}

std::unique_ptr<KvCodec> MakeVecInferCodec(std::shared_ptr<const VecInferCodebooks> codebooks) {
  return std::make_unique<VecInferCodec>(std::move(codebooks));
}

}  // namespace vqserve
