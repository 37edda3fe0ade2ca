#include "tests/util/decode_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace vqserve::testing {
namespace {

double Half(const uint8_t* p, size_t byte_off, size_t i) {
  uint16_t h;
  std::memcpy(&h, p + byte_off + 2 * i, 2);
  return HalfBitsToFloat(h);
}
int Code(const uint8_t* codes, int i, int bits) {
  const int bit = i * bits;
  return (codes[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
}
// code m of a vecinfer row: 8-bit codes one byte each, 12-bit codes c0 | c1 << 12 in 3 bytes.
int VecInferCodeAt(const uint8_t* row, int m, int bits) {
  if (bits == 8) return row[m];
  const uint8_t* b = row + 3 * (m / 2);
  const uint32_t w = b[0] | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16;
  return (m % 2 == 0 ? w : w >> 12) & 0xfff;
}

// decodes token tt of kv head h from a layer slice into k, v (head_dim each).
void DecodeToken(const DecodeCase& c, const uint8_t* s, int h, int tt, double* k, double* v) {
  const DecodeCaseSpec& sp = c.spec;
  const int H = sp.num_kv_heads, D = sp.head_dim, P = c.page_tokens;
  switch (sp.format) {
    case KvPageFormat::kFp16:
      for (int i = 0; i < D; ++i) {
        k[i] = Half(s, 0, (static_cast<size_t>(h) * P + tt) * D + i);
        v[i] = Half(s, 2 * static_cast<size_t>(H) * P * D, (static_cast<size_t>(h) * P + tt) * D + i);
      }
      break;
    case KvPageFormat::kKivi: {
      const int bits = sp.kivi_bits, ng = D / 32;
      const size_t kscale = 2 * H * D, vmin = 4 * H * D, vscale = vmin + 2 * H * P * ng;
      const size_t kcode = vscale + 2 * H * P * ng, vcode = kcode + static_cast<size_t>(H) * D * P * bits / 8;
      for (int i = 0; i < D; ++i) {
        const size_t ch = static_cast<size_t>(h) * D + i;
        k[i] = Half(s, 0, ch) + Half(s, kscale, ch) * Code(s + kcode + ch * P * bits / 8, tt, bits);
        const size_t at = (static_cast<size_t>(h) * P + tt) * ng + i / 32;
        const uint8_t* vc = s + vcode + (static_cast<size_t>(h) * P + tt) * D * bits / 8;
        v[i] = Half(s, vmin, at) + Half(s, vscale, at) * Code(vc, i, bits);
      }
      break;
    }
    case KvPageFormat::kVecInfer: {
      const int dk = sp.vq_k_sub_dim, dv = sp.vq_v_sub_dim, mk = D / dk, mv = D / dv;
      const int kb = sp.vq_k_code_bits, vb = sp.vq_v_code_bits, nk = 1 << kb, nv = 1 << vb;
      const size_t krow = static_cast<size_t>(mk) * kb / 8, vrow = static_cast<size_t>(mv) * vb / 8;
      const int g = sp.vq_per_head ? h : 0;
      const float* ck = c.k_codebook.data() + static_cast<size_t>(g) * nk * D;
      const float* cv = c.v_codebook.data() + static_cast<size_t>(g) * nv * D;
      const uint8_t* kc = s + (static_cast<size_t>(h) * P + tt) * krow;
      const uint8_t* vc = s + static_cast<size_t>(H) * P * krow + (static_cast<size_t>(h) * P + tt) * vrow;
      for (int m = 0; m < mk; ++m) {
        const size_t e = static_cast<size_t>(m) * nk + VecInferCodeAt(kc, m, kb);
        for (int j = 0; j < dk; ++j) k[m * dk + j] = ck[e * dk + j];
      }
      for (int m = 0; m < mv; ++m) {
        const size_t e = static_cast<size_t>(m) * nv + VecInferCodeAt(vc, m, vb);
        for (int j = 0; j < dv; ++j) v[m * dv + j] = cv[e * dv + j];
      }
      break;
    }
  }
}

}  // namespace

std::vector<double> ReferenceDecodeAttention(const DecodeCase& c) {
  const DecodeCaseSpec& sp = c.spec;
  const int NH = sp.num_heads, H = sp.num_kv_heads, D = sp.head_dim, G = NH / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(static_cast<size_t>(c.batch) * NH * D, 0.0);
  for (int b = 0; b < c.batch; ++b) {
    const int coded = c.coded_lens[b], n = coded + c.res_lens[b];
    for (int h = 0; h < H; ++h) {
      std::vector<double> ks(static_cast<size_t>(n) * D), vs(static_cast<size_t>(n) * D);
      for (int t = 0; t < coded; ++t) {
        const int page = c.block_tables[b * c.block_table_stride + t / c.page_tokens];
        const uint8_t* slice = c.pages.data() + page * c.page_bytes + sp.layer * c.layer_page_bytes;
        DecodeToken(c, slice, h, t % c.page_tokens, &ks[static_cast<size_t>(t) * D], &vs[static_cast<size_t>(t) * D]);
      }
      for (int t = coded; t < n; ++t) {
        const size_t r = ((static_cast<size_t>(c.slots[b]) * c.ring_tokens + t % c.ring_tokens) * H + h) * D;
        for (int i = 0; i < D; ++i) {
          ks[static_cast<size_t>(t) * D + i] = HalfBitsToFloat(c.ring_k[r + i]);
          vs[static_cast<size_t>(t) * D + i] = HalfBitsToFloat(c.ring_v[r + i]);
        }
      }
      for (int r = 0; r < G; ++r) {
        const int qh = h * G + r;
        const float* qv = c.q.data() + (static_cast<size_t>(b) * NH + qh) * D;
        const float* qt = c.q_tilde.data() + (static_cast<size_t>(b) * NH + qh) * D;
        std::vector<double> s(n);
        double mx = -INFINITY;
        for (int t = 0; t < n; ++t) {
          // coded vecinfer keys live in the transformed space: they meet q~.
          const float* qq = (sp.format == KvPageFormat::kVecInfer && t < coded) ? qt : qv;
          double d = 0;
          for (int i = 0; i < D; ++i) d += static_cast<double>(qq[i]) * ks[static_cast<size_t>(t) * D + i];
          s[t] = d * scale;
          mx = std::max(mx, s[t]);
        }
        double l = 0;
        double* o = out.data() + (static_cast<size_t>(b) * NH + qh) * D;
        for (int t = 0; t < n; ++t) {
          const double p = std::exp(s[t] - mx);
          l += p;
          for (int i = 0; i < D; ++i) o[i] += p * vs[static_cast<size_t>(t) * D + i];
        }
        if (n > 0) for (int i = 0; i < D; ++i) o[i] /= l;
      }
    }
  }
  return out;
}

double RelativeError(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    if (std::isnan(d)) return INFINITY;
    num += d * d;
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace vqserve::testing
