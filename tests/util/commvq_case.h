#ifndef VQSERVE_TESTS_UTIL_COMMVQ_CASE_H_
#define VQSERVE_TESTS_UTIL_COMMVQ_CASE_H_

// random commvq decode-attention inputs (page format of docs/kv_formats.md, "commvq-R": random
// 12-bit key codes and 8-bit value codes, sane fp16 token scales, books at trained-like scales)
// and a float64 decode-then-attend reference of that format. plain c++ (no abseil), so that
// the device's stand-alone decode_check can use it; tests compare against the cpu codec too.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/decode/decode_attention.h"
#include "tests/util/decode_case.h"

namespace vqserve::testing {

struct CommVqCaseSpec {
  int num_heads = 8;
  int num_kv_heads = 2;
  int head_dim = 128;
  int key_rounds = 11;       // rounds of the page layout
  int value_rounds = 1;
  int book_key_rounds = 21;  // rounds the books hold (>= the layout's)
  int book_value_rounds = 2;
  std::vector<int> lens;     // total tokens of each sequence (pages + residual ring)
  int residual_tokens = 128;
  float rope_theta = 500000.0f;
  uint64_t seed = 1;
};

// bytes of one layer's commvq page slice (one key group per head: head_dim 64 or 128).
inline size_t CommVqLayerBytes(int H, int D, int R, int RV) {
  return size_t{64} * H + size_t{48} * H * R + size_t{32} * H * RV * (D / 8);
}

// c.k_codebook: (H, book R, 64, D/2, 2) and c.v_codebook: (H, book Rv, D/8, 256, 8) of the
// attended layer c.spec.layer.
inline DecodeCase MakeCommVqCase(const CommVqCaseSpec& s) {
  DecodeCase c;
  c.spec.num_heads = s.num_heads;
  c.spec.num_kv_heads = s.num_kv_heads;
  c.spec.head_dim = s.head_dim;
  c.spec.residual_tokens = s.residual_tokens;
  c.spec.layer = 1;
  c.batch = static_cast<int>(s.lens.size());
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int H = s.num_kv_heads, D = s.head_dim, P = 32;
  c.layer_page_bytes = CommVqLayerBytes(H, D, s.key_rounds, s.value_rounds);
  c.page_bytes = c.layer_page_bytes * c.num_layers;
  c.ring_tokens = s.residual_tokens + P;
  int max_pages = 0, total_pages = 0;
  for (int b = 0; b < c.batch; ++b) {
    const int coded = CodedTokensFor(s.lens[b], s.residual_tokens, P);
    c.coded_lens.push_back(coded);
    c.res_lens.push_back(s.lens[b] - coded);
    max_pages = std::max(max_pages, coded / P);
    total_pages += coded / P;
  }
  c.num_pages = total_pages + 3;
  c.block_table_stride = max_pages + 1;
  std::vector<int32_t> ids(c.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.block_tables.assign(static_cast<size_t>(c.batch) * c.block_table_stride, 0);
  int next = 0;
  for (int b = 0; b < c.batch; ++b) {
    for (int j = 0; j < c.coded_lens[b] / P; ++j) c.block_tables[b * c.block_table_stride + j] = ids[next++];
  }
  c.pages.resize(c.page_bytes * c.num_pages);
  for (size_t i = 0; i < c.pages.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(c.pages.data() + i, &r, std::min<size_t>(8, c.pages.size() - i));
  }
  for (int pg = 0; pg < c.num_pages * c.num_layers; ++pg) {  // token scales (key norms)
    uint8_t* slice = c.pages.data() + pg * c.layer_page_bytes;
    for (int i = 0; i < H * P; ++i) {
      const uint16_t h = FloatToHalfBits(14.0f + 10.0f * unit(rng));
      std::memcpy(slice + 2 * i, &h, 2);
    }
  }
  std::vector<int32_t> slot_ids(c.batch + 1);
  std::iota(slot_ids.begin(), slot_ids.end(), 0);
  std::shuffle(slot_ids.begin(), slot_ids.end(), rng);
  c.slots.assign(slot_ids.begin(), slot_ids.begin() + c.batch);
  const size_t ring_elems = static_cast<size_t>(c.batch + 1) * c.ring_tokens * H * D;
  c.ring_k.resize(ring_elems);
  c.ring_v.resize(ring_elems);
  for (size_t i = 0; i < ring_elems; ++i) {
    c.ring_k[i] = FloatToHalfBits(1.7f * unit(rng));
    c.ring_v[i] = FloatToHalfBits(1.7f * unit(rng));
  }
  const size_t qn = static_cast<size_t>(c.batch) * s.num_heads * D;
  c.q.resize(qn);
  for (float& x : c.q) x = 1.7f * unit(rng);
  c.q_tilde = c.q;
  c.k_codebook.resize(static_cast<size_t>(H) * s.book_key_rounds * 64 * D);
  for (int h = 0; h < H; ++h) {
    for (int r = 0; r < s.book_key_rounds; ++r) {
      const float sc = 0.2f * std::pow(0.6f, static_cast<float>(r));
      float* bk = c.k_codebook.data() + (static_cast<size_t>(h) * s.book_key_rounds + r) * 64 * D;
      for (int i = 0; i < 64 * D; ++i) bk[i] = sc * unit(rng);
    }
  }
  c.v_codebook.resize(static_cast<size_t>(H) * s.book_value_rounds * 256 * D);
  for (int h = 0; h < H; ++h) {
    for (int r = 0; r < s.book_value_rounds; ++r) {
      const float sc = 1.7f * std::pow(0.5f, static_cast<float>(r));
      float* bv = c.v_codebook.data() + (static_cast<size_t>(h) * s.book_value_rounds + r) * 256 * D;
      for (int i = 0; i < 256 * D; ++i) bv[i] = sc * unit(rng);
    }
  }
  return c;
}

// the commvq fields of the kernel params for a case (after DeviceDecodeCase uploaded it).
inline void SetCommVqParams(const CommVqCaseSpec& s, cuda::DecodeAttentionParams* p) {
  p->commvq_key_rounds = s.key_rounds;
  p->commvq_value_rounds = s.value_rounds;
  p->rope_theta = s.rope_theta;
  p->vq_k_codebook_head_stride = static_cast<int64_t>(s.book_key_rounds) * 64 * s.head_dim;
  p->vq_v_codebook_head_stride = static_cast<int64_t>(s.book_value_rounds) * 256 * s.head_dim;
}

// float64 attention of every (sequence, query head) over the decoded pages (keys rotated to
// their positions) and the fp16 ring: (batch, num_heads, head_dim).
inline std::vector<double> ReferenceCommVq(const DecodeCase& c, const CommVqCaseSpec& s) {
  const int H = s.num_kv_heads, NH = s.num_heads, D = s.head_dim, P = 32, half = D / 2;
  const int R = s.key_rounds, RV = s.value_rounds, M = D / 8, grp = NH / H;
  std::vector<double> theta(half);
  for (int j = 0; j < half; ++j) {
    theta[j] = static_cast<float>(std::pow(static_cast<double>(s.rope_theta), -2.0 * j / D));
  }
  std::vector<double> out(static_cast<size_t>(c.batch) * NH * D, 0.0);
  for (int b = 0; b < c.batch; ++b) {
    const int coded = c.coded_lens[b], nres = c.res_lens[b], n = coded + nres;
    for (int h = 0; h < H; ++h) {
      std::vector<double> keys(static_cast<size_t>(n) * D), vals(static_cast<size_t>(n) * D, 0.0);
      const float* kb = c.k_codebook.data() + static_cast<size_t>(h) * s.book_key_rounds * 64 * D;
      const float* vb = c.v_codebook.data() + static_cast<size_t>(h) * s.book_value_rounds * 256 * D;
      for (int t = 0; t < coded; ++t) {
        const uint8_t* slice = c.pages.data() + c.block_tables[b * c.block_table_stride + t / P] * c.page_bytes +
                               c.spec.layer * c.layer_page_bytes;
        const int tt = t % P;
        uint16_t sb;
        std::memcpy(&sb, slice + 2 * (h * P + tt), 2);
        const double scale = HalfBitsToFloat(sb);
        std::vector<double> w(D, 0.0);
        for (int r = 0; r < R; ++r) {
          const uint8_t* g = slice + 64 * H + (static_cast<size_t>(h) * R + r) * 48 + (tt / 2) * 3;
          const int code = (tt & 1) ? ((g[1] >> 4) | (g[2] << 4)) : (g[0] | ((g[1] & 0xf) << 8));
          const float* ea = kb + (static_cast<size_t>(r) * 64 + (code & 63)) * D;
          const float* eb = kb + (static_cast<size_t>(r) * 64 + (code >> 6)) * D;
          for (int j = 0; j < half; ++j) {
            w[2 * j] += double{ea[2 * j]} - eb[2 * j + 1];
            w[2 * j + 1] += double{ea[2 * j + 1]} + eb[2 * j];
          }
        }
        for (int j = 0; j < half; ++j) {
          const double a = t * theta[j], cs = std::cos(a), sn = std::sin(a);
          keys[static_cast<size_t>(t) * D + 2 * j] = scale * (w[2 * j] * cs - w[2 * j + 1] * sn);
          keys[static_cast<size_t>(t) * D + 2 * j + 1] = scale * (w[2 * j] * sn + w[2 * j + 1] * cs);
        }
        const uint8_t* vc = slice + 64 * H + size_t{48} * H * R;
        for (int r = 0; r < RV; ++r) {
          for (int m = 0; m < M; ++m) {
            const int code = vc[((static_cast<size_t>(h) * RV + r) * M + m) * P + tt];
            const float* cv = vb + ((static_cast<size_t>(r) * M + m) * 256 + code) * 8;
            for (int e = 0; e < 8; ++e) vals[static_cast<size_t>(t) * D + m * 8 + e] += cv[e];
          }
        }
      }
      for (int i = 0; i < nres; ++i) {
        const size_t src = ((static_cast<size_t>(c.slots[b]) * c.ring_tokens + (coded + i) % c.ring_tokens) * H + h) * D;
        for (int d = 0; d < D; ++d) {
          keys[static_cast<size_t>(coded + i) * D + d] = HalfBitsToFloat(c.ring_k[src + d]);
          vals[static_cast<size_t>(coded + i) * D + d] = HalfBitsToFloat(c.ring_v[src + d]);
        }
      }
      for (int qi = 0; qi < grp; ++qi) {
        const int qh = h * grp + qi;
        const float* q = c.q.data() + (static_cast<size_t>(b) * NH + qh) * D;
        double* o = out.data() + (static_cast<size_t>(b) * NH + qh) * D;
        if (n == 0) continue;
        std::vector<double> sc(n);
        double mx = -INFINITY;
        for (int t = 0; t < n; ++t) {
          double d = 0;
          for (int k = 0; k < D; ++k) d += q[k] * keys[static_cast<size_t>(t) * D + k];
          sc[t] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[t]);
        }
        double l = 0;
        for (int t = 0; t < n; ++t) {
          const double pw = std::exp(sc[t] - mx);
          l += pw;
          for (int k = 0; k < D; ++k) o[k] += pw * vals[static_cast<size_t>(t) * D + k];
        }
        for (int k = 0; k < D; ++k) o[k] /= l;
      }
    }
  }
  return out;
}

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_COMMVQ_CASE_H_
