// the cuda runtime's small per-token kernels against their cpu references, on random data:
// rmsnorm to fp16 (kernels/cpu/rms_norm, both the vectorized and the generic kernel), rope
// over the q and k heads of a qkv row in one launch (kernels/cpu/rope), silu-mul to fp16, and
// the ring append of coded caches (fp16 rows at ring position pos % ring_tokens; tokens already
// coded skipped), and the vecinfer query transform q~ = H (q * lambda) (kernels/cpu/hadamard).
// skips itself where there is no cuda device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cpu/argmax.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"
#include "kernels/cuda/model/model_kernels.h"
#include "kernels/cuda/kv_step/ring_kv_step.h"
#include "kernels/cuda/kv_step/vecinfer_kv_step.h"
#include "runtime/cuda/cuda_device_array.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

// a device copy of a host vector (freed with the object); Get() copies it back.
template <typename T>
struct Dev : DeviceArray<T> {
  explicit Dev(const std::vector<T>& h) { this->Upload(h); }
  T* get() const { return this->data(); }
  std::vector<T> Get() const { return this->Download(); }
};

std::vector<float> Random(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<uint16_t> ToHalf(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  cpu::FloatToHalfRow(x.data(), h.data(), static_cast<int64_t>(x.size()));
  return h;
}

// largest distance in fp16 steps between the bits of a and b (both finite, same sign side).
int MaxHalfSteps(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  auto ordered = [](uint16_t h) { return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h); };
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(ordered(a[i]) - ordered(b[i])));
  return worst;
}

class CudaModelKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VQ_SKIP_WITHOUT_CUDA_DEVICE();
  }
};

// dims on the vectorized kernel (multiples of 4 up to 8192) and on the generic one (4098: not
// a multiple of 4; 14336: too long; an x one float past an aligned start), with and without
// the row list of the logits' norm.
TEST_F(CudaModelKernelsTest, RmsNormHalfMatchesCpu) {
  for (int dim : {64, 576, 4096, 4100, 8192, 4098, 14336}) {
    for (int misalign : {0, 1}) {
      for (bool with_rows : {false, true}) {
        const int n = 6, eps_rows = 9;
        const std::vector<float> x = Random(size_t(eps_rows) * dim + 1, dim + misalign, -3.0f, 3.0f);
        const std::vector<float> w = Random(dim, 7 * dim, 0.5f, 1.5f);
        const std::vector<int32_t> rows = {8, 0, 3, 3, 5, 1};
        Dev<float> dx(x), dw(w);
        Dev<int32_t> drows(rows);
        Dev<uint16_t> dout(std::vector<uint16_t>(size_t(n) * dim, 0xffff));
        ASSERT_EQ(cuda::LaunchRmsNormHalf(dx.get() + misalign, with_rows ? drows.get() : nullptr, dw.get(),
                                          reinterpret_cast<__half*>(dout.get()), n, dim, 1e-5f, nullptr),
                  "");
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> ref(size_t(n) * dim);
        for (int r = 0; r < n; ++r) {
          const int src = with_rows ? rows[r] : r;
          cpu::RmsNorm(x.data() + misalign + size_t(src) * dim, w.data(), ref.data() + size_t(r) * dim, 1, dim, 1e-5f);
        }
        // one fp16 step at most: the gpu sums the squares in double in another order
        EXPECT_LE(MaxHalfSteps(dout.Get(), ToHalf(ref)), 1) << "dim " << dim << " misalign " << misalign;
      }
    }
  }
}

// q (nh heads) and k (nkv heads) of qkv rows rotated by one launch over nh + nkv heads; v and
// the dims past 2 * rope_half stay as they were.
TEST_F(CudaModelKernelsTest, RopeOverQAndKHeadsMatchesCpu) {
  struct Case {
    int nh, nkv, head_dim, rope_half;
  };
  for (const Case c : {Case{32, 8, 128, 64}, Case{9, 3, 64, 32}, Case{4, 1, 64, 16}}) {
    const int n = 7, qkvd = (c.nh + 2 * c.nkv) * c.head_dim, heads = c.nh + c.nkv;
    const std::vector<float> x = Random(size_t(n) * qkvd, c.nh + c.head_dim);
    const std::vector<int32_t> pos = {0, 1, 31, 1000, 32767, 65536, 131071};
    cpu::RopeParams rp;
    rp.rope_dim = 2 * c.rope_half;
    rp.theta = 500000.0f;
    const std::vector<float> freqs = cpu::RopeFrequencies(rp);
    Dev<float> dx(x), dfreqs(freqs);
    Dev<int32_t> dpos(pos);
    ASSERT_EQ(cuda::LaunchRope(dx.get(), qkvd, n, heads, c.head_dim, c.rope_half, dpos.get(), dfreqs.get(), nullptr),
              "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = dx.Get();
    std::vector<float> ref = x;
    for (int t = 0; t < n; ++t) {
      std::vector<float> qk(x.begin() + size_t(t) * qkvd, x.begin() + size_t(t) * qkvd + size_t(heads) * c.head_dim);
      cpu::ApplyRope(qk.data(), 1, heads, c.head_dim, &pos[t], freqs);
      std::copy(qk.begin(), qk.end(), ref.begin() + size_t(t) * qkvd);
    }
    double worst = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - ref[i])));
    EXPECT_LE(worst, 2e-6) << "nh " << c.nh << " head_dim " << c.head_dim << " rope_half " << c.rope_half;
  }
}

// rows of a vocabulary's width and odd ones, with ties (the first wins), NaNs and all-NaN,
// against cpu::ArgMax of the same floats.
TEST_F(CudaModelKernelsTest, RowArgMaxMatchesCpu) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int cols : {1, 7, 1000, 1025, 49152, 128256}) {
    const int rows = 6;
    std::vector<float> x = Random(size_t(rows) * cols, cols, -10.0f, 10.0f);
    float* r1 = x.data() + size_t(1) * cols;  // a tie: the first of two maxima
    r1[cols / 2] = 50.0f;
    r1[cols - 1] = 50.0f;
    float* r2 = x.data() + size_t(2) * cols;  // NaNs around the maximum
    r2[0] = nan;
    r2[cols - 1] = 60.0f;
    if (cols > 2) r2[cols - 2] = nan;
    std::fill(x.begin() + size_t(3) * cols, x.begin() + size_t(4) * cols, nan);  // all NaN
    Dev<float> dx(x);
    Dev<int32_t> dout(std::vector<int32_t>(rows, -7));
    ASSERT_EQ(cuda::LaunchRowArgMax(dx.get(), rows, cols, dout.get(), nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> got = dout.Get();
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r], cpu::ArgMax(x.data() + size_t(r) * cols, cols)) << cols << " row " << r;
    }
  }
}

TEST_F(CudaModelKernelsTest, SiluMulHalfMatchesCpu) {
  const int n = 5, f = 1536;
  const std::vector<float> gu = Random(size_t(n) * 2 * f, 11, -6.0f, 6.0f);
  Dev<float> dgu(gu);
  Dev<uint16_t> dout(std::vector<uint16_t>(size_t(n) * f));
  ASSERT_EQ(cuda::LaunchSiluMulHalf(dgu.get(), reinterpret_cast<__half*>(dout.get()), n, f, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> ref(size_t(n) * f);
  cpu::SiluMul(gu.data(), ref.data(), n, f);
  EXPECT_LE(MaxHalfSteps(dout.Get(), ToHalf(ref)), 1);  // expf vs std::exp
}

// 3 sequences, 5 new tokens; tokens below coded_after are skipped (coded this step). the
// vectorized kernel (aligned rows of multiples of 4) and the generic one (token stride odd).
TEST_F(CudaModelKernelsTest, RingAppendWritesFp16RowsAtRingPositions) {
  for (int odd : {0, 1}) {
    const int hkv = 3, d = 64, row = hkv * d, ring = 40, slots = 4, ntok = 5;
    const int64_t token_stride = 3 * row + odd;  // a qkv-like row: k at 0, v at row
    const std::vector<float> qkv = Random(size_t(ntok) * token_stride + 2 * row, 21 + odd);
    const std::vector<int32_t> tok_seq = {0, 0, 1, 2, 2}, tok_pos = {45, 46, 3, 79, 80};
    const std::vector<int32_t> seq_slot = {2, 0, 3}, coded_after = {32, 0, 80};  // token 3 coded
    Dev<float> dqkv(qkv);
    Dev<int32_t> dseq(tok_seq), dpos(tok_pos), dslot(seq_slot), dcoded(coded_after);
    const std::vector<uint16_t> init(size_t(slots) * ring * row, 0x7777);
    Dev<uint16_t> rk(init), rv(init);
    cuda::PagedKvStep s;
    s.num_tokens = ntok;
    s.tok_seq = dseq.get();
    s.tok_pos = dpos.get();
    s.batch = 3;
    s.slots = dslot.get();
    s.coded_after = dcoded.get();
    s.ring_k = rk.get();
    s.ring_v = rv.get();
    s.ring_slot_stride = int64_t{ring} * row;
    s.ring_tokens = ring;
    s.num_kv_heads = hkv;
    s.head_dim = d;
    ASSERT_EQ(cuda::LaunchRingAppend(s, dqkv.get(), dqkv.get() + row, token_stride, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> want_k = init, want_v = init;
    for (int t = 0; t < ntok; ++t) {
      const int b = tok_seq[t];
      if (tok_pos[t] < coded_after[b]) continue;
      const size_t dst = size_t(seq_slot[b]) * ring * row + size_t(tok_pos[t] % ring) * row;
      cpu::FloatToHalfRow(qkv.data() + t * token_stride, want_k.data() + dst, row);
      cpu::FloatToHalfRow(qkv.data() + t * token_stride + row, want_v.data() + dst, row);
    }
    EXPECT_EQ(rk.Get(), want_k) << "odd stride " << odd;
    EXPECT_EQ(rv.Get(), want_v) << "odd stride " << odd;
  }
}

TEST_F(CudaModelKernelsTest, VecInferQueryTransformMatchesCpu) {
  // head_dim 32 .. 256 run the warp kernel, 16 the generic one; 9 query heads on 3 kv heads, rows
  // of a wider qkv stride; with and without the hadamard step.
  for (int d : {16, 32, 64, 128, 256}) {
    for (bool hadamard : {true, false}) {
      const int n = 5, heads = 9, hkv = 3, group = heads / hkv;
      const int64_t stride = int64_t{heads} * d + 40;
      const std::vector<float> q = Random(size_t(n) * stride, 41 + d);
      const std::vector<float> lam = Random(size_t(hkv) * d, 43 + d, 0.25f, 4.0f);
      Dev<float> dq(q), dlam(lam), dout(std::vector<float>(q.size(), 0.0f));
      cuda::VecInferLayerCodec c;
      c.lambda = dlam.get();
      c.hadamard = hadamard;
      ASSERT_EQ(cuda::LaunchVecInferQueryTransform(dq.get(), stride, n, heads, hkv, d, c, dout.get(), nullptr), "");
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = dout.Get();
      double worst = 0.0;
      for (int t = 0; t < n; ++t) {
        for (int h = 0; h < heads; ++h) {
          std::vector<float> want(d);
          const float* row = q.data() + t * stride + h * d;
          for (int i = 0; i < d; ++i) want[i] = row[i] * lam[(h / group) * d + i];
          if (hadamard) kernels::FastWalshHadamard(want.data(), d);
          for (int i = 0; i < d; ++i) {
            // the same butterflies in the same order; only 1 / sqrt(d) may round differently.
            worst = std::max(worst, std::abs(double(got[t * stride + h * d + i]) - want[i]) /
                                        (std::abs(double(want[i])) + 1e-30));
          }
        }
      }
      EXPECT_LE(worst, 4e-7) << "head_dim " << d << " hadamard " << hadamard;
    }
  }
}

}  // namespace
}  // namespace vqserve
