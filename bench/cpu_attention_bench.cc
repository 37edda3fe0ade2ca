// cpu decode attention on codes vs fp16 attention, one layer of the default model's shape
// (3 kv heads, 9 query heads, head_dim 64), one query, 4K-32K cached tokens, single thread.
// usage: cpu_attention_bench [--tokens 4096,8192,16384,32768] [--reps N] [--with-12bit]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/calibration/calibration_data.h"
#include "runtime/kv/commvq_codebooks.h"
#include "runtime/kv/commvq_codec.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/kivi_codec.h"
#include "runtime/kv/vecinfer_codec.h"
#include "runtime/calibration/vecinfer_trainer.h"

namespace vqserve {
namespace {

struct Named {
  std::string name;
  std::unique_ptr<KvCodec> codec;
};

// k/v (n, kv_heads, D) gaussian with a few large key channels.
void Fill(const KvShape& s, int n, uint64_t seed, std::vector<float>* k, std::vector<float>* v) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  const int row = s.num_kv_heads * s.head_dim;
  k->resize(static_cast<size_t>(n) * row);
  v->resize(k->size());
  for (size_t i = 0; i < k->size(); ++i) {
    (*k)[i] = normal(rng) * ((i % row) % 13 == 0 ? 6.0f : 1.0f);
    (*v)[i] = normal(rng);
  }
}

std::shared_ptr<const VecInferCodebooks> QuickBooks(const KvShape& s, float kb, float vb) {
  CalibrationData data;
  data.shape = s;
  data.layers.resize(1);
  Fill(s, 2048, 5, &data.layers[0].k_rope, &data.layers[0].v);
  data.layers[0].num_tokens = 2048;
  VecInferOptions o;
  o.k_bits = kb;
  o.v_bits = vb;
  o.iterations = 3;
  return std::make_shared<const VecInferCodebooks>(*TrainVecInfer(data, o));
}

int Main(int argc, char** argv) {
  std::vector<int> lengths = {4096, 8192, 16384, 32768};
  int reps = 20;
  bool with12 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--with-12bit")) with12 = true;
    if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      lengths.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) lengths.push_back(std::atoi(p));
    }
  }
  const KvShape s{1, 3, 9, 64};
  std::vector<Named> codecs;
  codecs.push_back({"fp16", MakeFp16Codec(s)});
  codecs.push_back({"kivi-k4v4", MakeKiviCodec(s, 4)});
  codecs.push_back({"kivi-k2v2", MakeKiviCodec(s, 2)});
  codecs.push_back({"vecinfer-k4v4", MakeVecInferCodec(QuickBooks(s, 4, 4))});
  codecs.push_back({"vecinfer-k2v2", MakeVecInferCodec(QuickBooks(s, 2, 2))});
  codecs.push_back({"vecinfer-k1v1", MakeVecInferCodec(QuickBooks(s, 1, 1))});
  if (with12) {
    codecs.push_back({"vecinfer-k3v3", MakeVecInferCodec(QuickBooks(s, 3, 3))});
    codecs.push_back({"vecinfer-k1.5v1.5", MakeVecInferCodec(QuickBooks(s, 1.5f, 1.5f))});
  }
  for (const char* name : {"commvq-2", "commvq-1"}) {
    auto o = CommVqOptionsForName(name, s);
    if (!o.ok()) continue;
    auto books = CommVqCodebooks::Create(s, 10000.0f, o->key_rounds, o->value_rounds);
    if (!books.ok()) continue;
    // random entries: speed does not depend on trained values.
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (int r = 0; r < o->key_rounds; ++r) {
      float* kb = books->mutable_key_book(0, 0, r);
      for (int h = 0; h < s.num_kv_heads; ++h) {
        kb = books->mutable_key_book(0, h, r);
        for (size_t i = 0; i < books->key_book_floats(); ++i) kb[i] = normal(rng);
      }
    }
    for (int r = 0; r < o->value_rounds; ++r) {
      for (int h = 0; h < s.num_kv_heads; ++h) {
        float* vb = books->mutable_value_book(0, h, r);
        for (size_t i = 0; i < books->value_book_floats(); ++i) vb[i] = normal(rng);
      }
    }
    codecs.push_back({name, MakeCommVqCodec(s, std::make_shared<const CommVqCodebooks>(std::move(*books)),
                                            o->key_rounds, o->value_rounds)});
  }

  std::printf("decode attention, 1 query, 1 layer (3 kv heads, 9 heads, head_dim 64), 1 thread;\n"
              "median of %d runs of KvCodec::AttendPages over all coded tokens\n\n", reps);
  std::printf("| codec | bytes/token/layer |");
  for (int n : lengths) std::printf(" %dK us | ×fp16 |", n / 1024);
  std::printf("\n|---|---|");
  for (size_t i = 0; i < lengths.size(); ++i) std::printf("---|---|");
  std::printf("\n");
  std::vector<std::vector<double>> times(codecs.size(), std::vector<double>(lengths.size()));
  std::vector<float> q(static_cast<size_t>(s.num_heads) * s.head_dim);
  std::mt19937 qr(9);
  std::normal_distribution<float> normal;
  for (float& x : q) x = 0.2f * normal(qr);
  for (size_t li = 0; li < lengths.size(); ++li) {
    const int n = lengths[li];
    std::vector<float> k, v;
    Fill(s, n, 11, &k, &v);
    for (size_t ci = 0; ci < codecs.size(); ++ci) {
      const KvCodec& c = *codecs[ci].codec;
      const int P = c.page_tokens();
      const int pages = n / P;
      const int row = s.num_kv_heads * s.head_dim;
      std::vector<uint8_t> store(c.LayerPageBytes() * pages);
      std::vector<const uint8_t*> ptrs(pages);
      std::vector<float> kp = k;
      if (c.needs_pre_rope_keys()) kp = k;  // synthetic: treat as pre-rope keys
      for (int j = 0; j < pages; ++j) {
        ptrs[j] = store.data() + c.LayerPageBytes() * j;
        c.EncodePage(0, j * P, kp.data() + static_cast<size_t>(j) * P * row,
                     v.data() + static_cast<size_t>(j) * P * row, store.data() + c.LayerPageBytes() * j);
      }
      std::vector<float> m(s.num_heads), l(s.num_heads), acc(q.size());
      std::vector<double> runs;
      for (int r = 0; r < reps + 1; ++r) {
        std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        std::fill(acc.begin(), acc.end(), 0.0f);
        SoftmaxState st{m.data(), l.data(), acc.data()};
        auto t0 = std::chrono::steady_clock::now();
        c.AttendPages(0, ptrs.data(), pages * P, q.data(), n, &st);
        auto t1 = std::chrono::steady_clock::now();
        if (r > 0) runs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      std::sort(runs.begin(), runs.end());
      times[ci][li] = runs[runs.size() / 2];
    }
  }
  for (size_t ci = 0; ci < codecs.size(); ++ci) {
    const KvCodec& c = *codecs[ci].codec;
    std::printf("| %s | %.0f |", codecs[ci].name.c_str(), double(c.LayerPageBytes()) / c.page_tokens());
    for (size_t li = 0; li < lengths.size(); ++li) {
      std::printf(" %.0f | %.2f |", times[ci][li], times[ci][li] / times[0][li]);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace vqserve

int main(int argc, char** argv) { return vqserve::Main(argc, argv); }
