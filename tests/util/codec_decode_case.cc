#include "tests/util/codec_decode_case.h"

#include <limits>

#include "runtime/kv/kv_cache.h"

namespace vqserve::testing {

CodecDecodeCase MakeCodecDecodeCase(const KvCodec& codec, int layer, int n, const std::vector<float>& k,
                                    const std::vector<float>& v, const std::vector<float>& q) {
  const KvShape& shape = codec.shape();
  const int H = shape.num_kv_heads, NH = shape.num_heads, D = shape.head_dim, P = codec.page_tokens();
  const int R = codec.residual_tokens();
  KvCacheSpec spec;
  spec.page_tokens = P;
  spec.residual_tokens = R;
  const int coded = CodedTokens(spec, n), pages = coded / P;
  const size_t lpb = codec.LayerPageBytes(), page_bytes = lpb * shape.num_layers;
  std::vector<uint8_t> pool(page_bytes * (pages + 1), 0);
  std::vector<int32_t> table(pages + 1, 0);
  std::vector<const uint8_t*> slices(pages);
  for (int j = 0; j < pages; ++j) {
    table[j] = pages - 1 - j;
    uint8_t* slice = pool.data() + table[j] * page_bytes + layer * lpb;
    const size_t at = static_cast<size_t>(j) * P * H * D;
    codec.EncodePage(layer, j * P, &k[at], &v[at], slice);
    slices[j] = slice;
  }
  // the ring (fp16) and the reference over the same rounded rows.
  const int nres = n - coded, ring = R + P;
  std::vector<uint16_t> rk(static_cast<size_t>(ring) * H * D), rv(rk.size());
  std::vector<float> kd(static_cast<size_t>(nres) * H * D), vd(kd.size());
  for (int t = 0; t < nres; ++t) {
    for (int e = 0; e < H * D; ++e) {
      const size_t src = static_cast<size_t>(coded + t) * H * D + e;
      const size_t dst = static_cast<size_t>((coded + t) % ring) * H * D + e;
      rk[dst] = FloatToHalfBits(k[src]);
      rv[dst] = FloatToHalfBits(v[src]);
      kd[static_cast<size_t>(t) * H * D + e] = HalfBitsToFloat(rk[dst]);
      vd[static_cast<size_t>(t) * H * D + e] = HalfBitsToFloat(rv[dst]);
    }
  }
  std::vector<float> m(NH, -std::numeric_limits<float>::infinity()), l(NH, 0.0f),
      acc(static_cast<size_t>(NH) * D, 0.0f);
  SoftmaxState state{m.data(), l.data(), acc.data()};
  if (coded > 0) codec.AttendPages(layer, slices.data(), coded, q.data(), n - 1, &state);
  if (nres > 0) AttendDense(shape, q.data(), kd.data(), vd.data(), nres, &state);
  CodecDecodeCase out;
  out.reference.resize(static_cast<size_t>(NH) * D);
  FinishSoftmax(shape, state, out.reference.data());

  DecodeCase& c = out.gpu;
  c.batch = 1;
  c.spec.num_heads = NH;
  c.spec.num_kv_heads = H;
  c.spec.head_dim = D;
  c.spec.layer = layer;
  c.page_bytes = page_bytes;
  c.layer_page_bytes = lpb;
  c.pages = std::move(pool);
  c.block_table_stride = pages + 1;
  c.block_tables = std::move(table);
  c.coded_lens = {coded};
  c.res_lens = {nres};
  c.slots = {0};
  c.ring_tokens = ring;
  c.ring_k = std::move(rk);
  c.ring_v = std::move(rv);
  c.q = q;
  c.q_tilde = q;
  return out;
}

}  // namespace vqserve::testing
