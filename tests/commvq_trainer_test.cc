// commvq training: em monotonicity, m-step exactness, reconstruction vs rounds, on real keys
// and values of the default model.
#include "runtime/calibration/commvq_trainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/kv/commvq_codec.h"
#include "runtime/calibration/commvq_em.h"
#include "runtime/kv/commvq_math.h"
#include "runtime/gguf/ggml_type.h"
#include "tests/util/model_kv_samples.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

// normalized pre-rope key pairs of (layer index in data, head) as em targets (n, D).
std::vector<float> NormalizedKeys(const CalibrationData& data, int li, int h, int max_n) {
  const KvShape& s = data.shape;
  const LayerSamples& ls = data.layers[li];
  std::vector<float> out;
  for (int t = 0; t < ls.num_tokens && t < max_n; ++t) {
    const float* k = ls.k_pre_rope.data() + (size_t{1} * t * s.num_kv_heads + h) * s.head_dim;
    double ss = 0;
    for (int d = 0; d < s.head_dim; ++d) ss += double{k[d]} * k[d];
    for (int d = 0; d < s.head_dim; ++d) out.push_back(static_cast<float>(k[d] / std::sqrt(ss)));
  }
  return out;
}

class CommVqTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::RealTextPath().empty()) return;
    absl::StatusOr<CalibrationData> d =
        testing::ModelKvSamples(testing::RealTextPath(), 1536, {0, 14, 29});
    if (d.ok()) data_ = new CalibrationData(std::move(*d));
  }
  void SetUp() override {
    if (data_ == nullptr) VQ_SKIP_UNLESS_CI << "default model or fortunes text missing";
  }
  static CalibrationData* data_;
};
CalibrationData* CommVqTrainerTest::data_ = nullptr;

TEST_F(CommVqTrainerTest, FreeEnergyNeverIncreasesAtFixedTemperature) {
  const int g = data_->shape.head_dim / 2;
  for (int li : {0, 2}) {
    std::vector<float> z = NormalizedKeys(*data_, li, 1, 512);
    commvq::EmOptions o;
    o.steps = 12;
    o.temp_start = o.temp_end = 1e-3;
    commvq::EmResult em = commvq::TrainCommutativeBook(z.data(), 512, g, o);
    ASSERT_EQ(em.steps.size(), 13u);
    for (size_t k = 0; k + 1 < em.steps.size(); ++k) {
      const commvq::EmStep& a = em.steps[k];
      const commvq::EmStep& b = em.steps[k + 1];
      EXPECT_LE(b.free_energy, a.free_energy + 1e-9 * std::fabs(a.free_energy)) << "step " << k;
      EXPECT_LE(a.expected_after, a.expected_before + 1e-12) << "step " << k;
    }
    EXPECT_LT(em.steps.back().free_energy, 0.9 * em.steps.front().free_energy);
  }
}

TEST_F(CommVqTrainerTest, AnnealedEmStepsNeverIncreaseExpectedDistortion) {
  const int g = data_->shape.head_dim / 2;
  std::vector<float> z = NormalizedKeys(*data_, 1, 0, 768);
  commvq::EmOptions o;
  o.steps = 25;
  commvq::EmResult em = commvq::TrainCommutativeBook(z.data(), 768, g, o);
  for (const commvq::EmStep& st : em.steps) {
    EXPECT_LE(st.expected_after, st.expected_before + 1e-12);
  }
  EXPECT_LT(em.hard_mse, 0.8 * em.steps.front().hard_mse);
  EXPECT_LE(em.hard_mse, em.steps.back().hard_mse);
}

// the m-step solution zeroes the gradient of sum_nc w_nc d_nc, with the weights recomputed here
// by brute force over all 4096 centres in float64.
TEST_F(CommVqTrainerTest, MStepIsTheExactLeastSquaresSolution) {
  const int n = 96, g = data_->shape.head_dim / 2, dim = 2 * g;
  std::vector<float> z = NormalizedKeys(*data_, 2, 2, n);
  std::mt19937_64 rng(3);
  std::vector<double> old_book = commvq::InitialBook(z.data(), n, g, rng);
  const double temp = 3e-2;
  commvq::EmStats st;
  commvq::EStep(z.data(), n, g, old_book, temp, &st);
  std::vector<double> book = old_book;
  commvq::MStep(st, g, commvq::EmLambda(n), &book);
  std::vector<double> grad(book.size(), 0.0);
  double sum_new = 0, sum_old = 0;
  std::vector<double> w(4096), d_old(4096), r(size_t{1} * 4096 * dim);
  for (int i = 0; i < n; ++i) {
    const float* zi = &z[size_t{1} * i * dim];
    double dmin = 1e300;
    for (int c = 0; c < 4096; ++c) {
      const int a = c % 64, b = c / 64;
      double dold = 0;
      for (int j = 0; j < g; ++j) {
        double re = zi[2 * j] - (old_book[(a * g + j) * 2] - old_book[(b * g + j) * 2 + 1]);
        double im = zi[2 * j + 1] - (old_book[(a * g + j) * 2 + 1] + old_book[(b * g + j) * 2]);
        dold += re * re + im * im;
      }
      d_old[c] = dold;
      dmin = std::min(dmin, dold);
    }
    double zsum = 0;
    for (int c = 0; c < 4096; ++c) zsum += w[c] = std::exp(-(d_old[c] - dmin) / temp);
    for (int c = 0; c < 4096; ++c) {
      const int a = c % 64, b = c / 64;
      const double wc = w[c] / zsum;
      double dnew = 0;
      for (int j = 0; j < g; ++j) {
        double re = zi[2 * j] - (book[(a * g + j) * 2] - book[(b * g + j) * 2 + 1]);
        double im = zi[2 * j + 1] - (book[(a * g + j) * 2 + 1] + book[(b * g + j) * 2]);
        dnew += re * re + im * im;
        grad[(a * g + j) * 2] += -2 * wc * re;      // d/dx_A
        grad[(a * g + j) * 2 + 1] += -2 * wc * im;  // d/dy_A
        grad[(b * g + j) * 2] += -2 * wc * im;      // d/dx_B
        grad[(b * g + j) * 2 + 1] += 2 * wc * re;   // d/dy_B
      }
      sum_new += wc * dnew;
      sum_old += wc * d_old[c];
    }
  }
  double max_grad = 0;
  for (double x : grad) max_grad = std::max(max_grad, std::fabs(x));
  EXPECT_LT(max_grad, 1e-6 * n);
  EXPECT_NEAR(commvq::ExpectedDistortion(st, book, g), sum_new, 1e-9 * sum_new);
  EXPECT_NEAR(st.expected, sum_old, 1e-9 * sum_old);
  EXPECT_LT(sum_new, sum_old);
}

// held-out tokens coded with 1..R key rounds and 1..Rv value rounds: every extra round lowers
// the relative reconstruction error (keys after rope vs the model's, values vs the model's).
TEST_F(CommVqTrainerTest, ReconstructionErrorFallsWithEveryRound) {
  const int train_tokens = 1280, kr = 6, vr = 3;
  CalibrationData train = *data_;
  for (LayerSamples& ls : train.layers) {
    size_t keep = size_t{1} * train_tokens * train.shape.num_kv_heads * train.shape.head_dim;
    ls.k_pre_rope.resize(keep);
    ls.k_rope.resize(keep);
    ls.v.resize(keep);
    ls.positions.resize(train_tokens);
    ls.num_tokens = train_tokens;
  }
  CommVqOptions o;
  o.key_rounds = kr;
  o.value_rounds = vr;
  o.em_steps = 20;
  o.max_vectors = 1024;
  int lines = 0;
  absl::StatusOr<CommVqCodebooks> books =
      TrainCommVq(train, o, [&](const std::string& line) { ++lines; });
  ASSERT_TRUE(books.ok()) << books.status();
  EXPECT_EQ(lines, 3 * data_->shape.num_kv_heads);
  auto shared = std::make_shared<const CommVqCodebooks>(std::move(*books));
  const KvShape& s = data_->shape;
  const size_t row = size_t{1} * s.num_kv_heads * s.head_dim;
  std::vector<double> prev_k(3, 1e9), prev_v(3, 1e9);
  for (int r = 1; r <= std::max(kr, vr); ++r) {
    auto codec = MakeCommVqCodec(s, shared, std::min(r, kr), std::min(r, vr));
    ASSERT_NE(codec, nullptr);
    std::vector<uint8_t> page(codec->LayerPageBytes());
    std::vector<float> dk(32 * row), dv(32 * row);
    for (int l = 0; l < 3; ++l) {
      const LayerSamples& ls = data_->layers[l];
      double ek = 0, nk = 0, ev = 0, nv = 0;
      for (int first = train_tokens; first + 32 <= ls.num_tokens; first += 32) {
        codec->EncodePage(l, first, &ls.k_pre_rope[first * row], &ls.v[first * row],
                          page.data());
        codec->DecodePage(l, first, page.data(), dk.data(), dv.data());
        for (size_t i = 0; i < 32 * row; ++i) {
          double a = ls.k_rope[first * row + i], b = ls.v[first * row + i];
          ek += (dk[i] - a) * (dk[i] - a);
          nk += a * a;
          ev += (dv[i] - b) * (dv[i] - b);
          nv += b * b;
        }
      }
      double rk = ek / nk, rv = ev / nv;
      printf("layer %d: %d key rounds rel err %.4f, %d value rounds rel err %.4f\n", l,
             std::min(r, kr), rk, std::min(r, vr), rv);
      if (r <= kr) {
        EXPECT_LT(rk, prev_k[l]) << "layer " << l << " key rounds " << r;
      }
      if (r <= vr) {
        EXPECT_LT(rv, prev_v[l]) << "layer " << l << " value rounds " << r;
      }
      prev_k[l] = rk;
      prev_v[l] = rv;
    }
  }
}

TEST_F(CommVqTrainerTest, TrainingIsDeterministicAndValidatesInput) {
  CalibrationData one;
  one.shape = data_->shape;
  one.shape.num_layers = 1;
  one.rope_theta = data_->rope_theta;
  one.layers.push_back(data_->layers[1]);
  CommVqOptions o;
  o.key_rounds = 2;
  o.value_rounds = 1;
  o.em_steps = 5;
  o.max_vectors = 256;
  o.max_value_vectors = 512;
  o.kmeans_iters = 3;
  absl::StatusOr<CommVqCodebooks> a = TrainCommVq(one, o, nullptr);
  o.num_threads = 1;
  absl::StatusOr<CommVqCodebooks> b = TrainCommVq(one, o, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Serialize(), b->Serialize());
  EXPECT_EQ(a->rope_theta(), data_->rope_theta);
  one.layers[0].v.pop_back();
  EXPECT_FALSE(TrainCommVq(one, o, nullptr).ok());
}

// measurement (disabled): trains "commvq-2" on the whole default model (4096 tokens of
// fortunes), prints the time and held-out reconstruction errors of commvq-2 and commvq-1.
TEST_F(CommVqTrainerTest, DISABLED_FullModel) {
  std::vector<int> layers;
  for (int l = 0; l < 30; ++l) layers.push_back(l);
  absl::StatusOr<CalibrationData> all =
      testing::ModelKvSamples(testing::RealTextPath(), 4608, layers);
  ASSERT_TRUE(all.ok()) << all.status();
  const int train_tokens = 4096;
  CalibrationData train = *all;
  for (LayerSamples& ls : train.layers) {
    size_t keep = size_t{1} * train_tokens * train.shape.num_kv_heads * train.shape.head_dim;
    ls.k_pre_rope.resize(keep);
    ls.k_rope.resize(keep);
    ls.v.resize(keep);
    ls.positions.resize(train_tokens);
    ls.num_tokens = train_tokens;
  }
  absl::StatusOr<CommVqOptions> o = CommVqOptionsForName("commvq-2", train.shape);
  ASSERT_TRUE(o.ok());
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<CommVqCodebooks> books =
      TrainCommVq(train, *o, [](const std::string& line) { printf("%s\n", line.c_str()); });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(books.ok());
  printf("trained commvq-2 books in %.1f s\n", secs);
  auto shared = std::make_shared<const CommVqCodebooks>(std::move(*books));
  const KvShape& s = all->shape;
  const size_t row = size_t{1} * s.num_kv_heads * s.head_dim;
  for (const char* name : {"commvq-2", "commvq-1"}) {
    absl::StatusOr<CommVqOptions> no = CommVqOptionsForName(name, s);
    auto codec = MakeCommVqCodec(s, shared, no->key_rounds, no->value_rounds);
    std::vector<uint8_t> page(codec->LayerPageBytes());
    std::vector<float> dk(32 * row), dv(32 * row);
    double sk = 0, sv = 0;
    for (int l = 0; l < s.num_layers; ++l) {
      const LayerSamples& ls = all->layers[l];
      double ek = 0, nk = 0, ev = 0, nv = 0;
      for (int first = train_tokens; first + 32 <= ls.num_tokens; first += 32) {
        codec->EncodePage(l, first, &ls.k_pre_rope[first * row], &ls.v[first * row],
                          page.data());
        codec->DecodePage(l, first, page.data(), dk.data(), dv.data());
        for (size_t i = 0; i < 32 * row; ++i) {
          double a = ls.k_rope[first * row + i], b = ls.v[first * row + i];
          ek += (dk[i] - a) * (dk[i] - a);
          nk += a * a;
          ev += (dv[i] - b) * (dv[i] - b);
          nv += b * b;
        }
      }
      printf("%s layer %2d: key rel err %.4f value rel err %.4f\n", name, l, ek / nk, ev / nv);
      sk += ek / nk;
      sv += ev / nv;
    }
    printf("%s (%d key / %d value rounds, %.4f bits/element, %zu bytes/layer page): mean key "
           "rel err %.4f, mean value rel err %.4f\n",
           name, no->key_rounds, no->value_rounds,
           CommVqBitsPerElement(s, no->key_rounds, no->value_rounds), codec->LayerPageBytes(),
           sk / s.num_layers, sv / s.num_layers);
  }
}

// experiment (disabled): quality and time of one head's key rounds for settings from env.
TEST_F(CommVqTrainerTest, DISABLED_Explore) {
  int n = std::getenv("CVQ_N") ? std::atoi(std::getenv("CVQ_N")) : 1024;
  int steps = std::getenv("CVQ_STEPS") ? std::atoi(std::getenv("CVQ_STEPS")) : 100;
  int rounds = std::getenv("CVQ_R") ? std::atoi(std::getenv("CVQ_R")) : 3;
  double t0 = std::getenv("CVQ_T0") ? std::atof(std::getenv("CVQ_T0")) : 1e-3;
  double t1 = std::getenv("CVQ_T1") ? std::atof(std::getenv("CVQ_T1")) : 1e-5;
  int li = std::getenv("CVQ_L") ? std::atoi(std::getenv("CVQ_L")) : 1;
  absl::StatusOr<CalibrationData> big =
      testing::ModelKvSamples(testing::RealTextPath(), 6144, {0, 14, 29});
  ASSERT_TRUE(big.ok()) << big.status();
  const int D = big->shape.head_dim, g = D / 2;
  std::vector<float> all = NormalizedKeys(*big, li, 0, 6144);
  int total = static_cast<int>(all.size() / D);
  std::vector<float> train(all.begin(), all.begin() + size_t{1} * n * D);
  ASSERT_LE(n, total - 1024);
  std::vector<float> test(all.begin() + size_t{1} * (total - 1024) * D, all.end());
  std::vector<float> base(4096), u(size_t{1} * std::max(n, 1024) * 128);
  for (int r = 0; r < rounds; ++r) {
    commvq::EmOptions o;
    o.steps = steps;
    o.temp_start = t0;
    o.temp_end = t1;
    auto start = std::chrono::steady_clock::now();
    commvq::EmResult em = commvq::TrainCommutativeBook(train.data(), n, g, o);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double test_e = 0;
    for (std::vector<float>* set : {&train, &test}) {
      int m = static_cast<int>(set->size() / D);
      commvq::CentreNorms(em.book.data(), g, g, base.data());
      commvq::ProjectOnEntries(set->data(), m, em.book.data(), g, g, u.data());
      double e = 0;
      for (int i = 0; i < m; ++i) {
        int c = commvq::NearestCode(base.data(), &u[size_t{1} * i * 128], nullptr);
        commvq::AddCentre(em.book.data(), g, g, c, -1.0f, &(*set)[size_t{1} * i * D]);
        for (int k = 0; k < D; ++k) e += double{(*set)[size_t{1} * i * D + k]} * (*set)[size_t{1} * i * D + k];
      }
      test_e = e / m;
    }
    printf("round %d: train hard %.5f (first step %.5f) test %.5f  %.2f s\n", r + 1,
           em.hard_mse, em.steps[0].hard_mse, test_e, secs);
  }
}

}  // namespace
}  // namespace vqserve
