// vecinfer -pca keys on the gpu against the cpu codec (runtime/kv/vecinfer_codec.h): random
// score-whitened books (an orthogonal times diagonal transform, a large key mean, sub-vectors of
// 1 to 8 dims in a different order per kv head) made into a CudaKvCache, whose device constants
// (centroids plus (mean T), the sizes) the kernels read:
//  - decode attention (the lut built by LaunchVecInferPcaLut, copied by the tensor-core kernel)
//    over pages the cpu codec wrote, against the codec's own AttendPages, with the queries
//    transformed on the host in float64 (q~ = T^-1 q), at head_dim 64 and 128 and gqa 1, 3, 4, 8,
//    with D / 4 key codes a token (k2v2-pca) and 19 or 38 (k2.375v2-pca: the kernel's runtime
//    code count);
//  - the query transform kernel against that float64 q~;
//  - the page encoder against the cpu EncodePage: codes equal except at near-ties.
// skips itself where there is no cuda device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/encode/vecinfer_encode.h"
#include "kernels/cuda/kv_step/vecinfer_kv_step.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_codec.h"
#include "runtime/kv/vecinfer_codec.h"
#include "tests/util/codec_decode_case.h"
#include "tests/util/cuda_device.h"
#include "tests/util/decode_case.h"
#include "tests/util/decode_reference.h"
#include "tests/util/device_case.h"

namespace vqserve {
namespace {

constexpr int kLayer = 1;  // of 2: layer offsets exercised

// random -pca books for a 2-layer vecinfer-k{k_bits}v2-pca `shape` (see the file comment).
std::shared_ptr<VecInferCodebooks> RandomPcaBooks(const KvShape& shape, unsigned seed, float k_bits) {
  auto b = std::make_shared<VecInferCodebooks>();
  b->options.k_bits = k_bits;
  b->options.v_bits = 2;
  b->options.key_pca = true;
  b->shape = shape;
  const int L = shape.num_layers, H = shape.num_kv_heads, D = shape.head_dim;
  const int mk = static_cast<int>(D * k_bits / 8);
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> u(-0.7, 0.7);
  b->lambda.assign(static_cast<size_t>(L) * H * D, 1.0f);
  const std::vector<int> sizes16 = {1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5, 5, 6, 6, 6, 8};  // sum 64
  const std::vector<int> sizes19 = {1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6};  // sum 64
  const std::vector<int>& sizes = mk % 19 == 0 ? sizes19 : sizes16;
  for (int at = 0; at < L * H; ++at) {
    for (int i = 0; i < D; ++i) b->k_mean.push_back(static_cast<float>(3.0 * normal(rng)));
    // Q orthogonal (gram-schmidt of a gaussian matrix, columns), s_j in [e^-0.7, e^0.7]:
    // T = Q diag(s), T^-1 = diag(1 / s) Q^T.
    std::vector<double> q(static_cast<size_t>(D) * D), s(D);
    for (double& x : q) x = normal(rng);
    for (int j = 0; j < D; ++j) {
      for (int p = 0; p < j; ++p) {
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += q[i * D + j] * q[i * D + p];
        for (int i = 0; i < D; ++i) q[i * D + j] -= dot * q[i * D + p];
      }
      double norm = 0;
      for (int i = 0; i < D; ++i) norm += q[i * D + j] * q[i * D + j];
      for (int i = 0; i < D; ++i) q[i * D + j] /= std::sqrt(norm);
      s[j] = std::exp(u(rng));
    }
    const size_t t0 = b->k_transform.size();
    b->k_transform.resize(t0 + static_cast<size_t>(D) * D);
    b->k_inverse.resize(b->k_transform.size());
    for (int i = 0; i < D; ++i) {
      for (int j = 0; j < D; ++j) {
        b->k_transform[t0 + i * D + j] = static_cast<float>(q[i * D + j] * s[j]);
        b->k_inverse[t0 + j * D + i] = static_cast<float>(q[i * D + j] / s[j]);
      }
    }
    const int n = static_cast<int>(sizes.size());
    for (int m = 0; m < mk; ++m) b->k_dims.push_back(sizes[(m + at) % n]);  // D 128: twice over
  }
  b->k_centroids.resize(static_cast<size_t>(L) * H * D * 256);
  for (float& x : b->k_centroids) x = static_cast<float>(0.8 * normal(rng));
  b->v_centroids.resize(static_cast<size_t>(L) * D * 256);
  for (float& x : b->v_centroids) x = static_cast<float>(normal(rng));
  return b;
}

// q~ = T^-1 q of query head qh (kv head qh / group) of kLayer in float64.
std::vector<double> PcaQuery(const VecInferCodebooks& b, const float* q, int kvh) {
  const int D = b.shape.head_dim;
  const float* inv = b.k_inverse.data() + (static_cast<size_t>(kLayer) * b.shape.num_kv_heads + kvh) * D * D;
  std::vector<double> out(D, 0.0);
  for (int j = 0; j < D; ++j) {
    for (int i = 0; i < D; ++i) out[j] += static_cast<double>(inv[j * D + i]) * q[i];
  }
  return out;
}

struct Pca {
  int mk = 0;  // key codes a token
  KvShape shape;
  std::shared_ptr<VecInferCodebooks> books;
  std::unique_ptr<KvCodec> codec;
  std::unique_ptr<CudaKvCache> cache;  // the runtime's device constants
};

Pca MakePca(int d, int group, unsigned seed, float k_bits = 2.0f) {
  Pca p;
  p.mk = static_cast<int>(d * k_bits / 8);
  p.shape = KvShape{2, 2, 2 * group, d};
  p.books = RandomPcaBooks(p.shape, seed, k_bits);
  p.codec = MakeVecInferCodec(p.books);
  auto cache = MakeCudaVecInferKvCache(p.books, 1, 1);
  EXPECT_TRUE(cache.ok()) << cache.status();
  if (cache.ok()) p.cache = std::move(*cache);
  return p;
}

// n tokens (pages the cpu codec wrote + fp16 ring) attended by one query on the gpu (the
// runtime's -pca constants) and by the codec's AttendPages; relative error of the outputs.
void CompareDecode(const Pca& pca, int n, bool half_values) {
  const KvCodec& codec = *pca.codec;
  const KvShape& shape = pca.shape;
  const int H = shape.num_kv_heads, NH = shape.num_heads, D = shape.head_dim;
  const int group = NH / H, mk = pca.mk;
  std::mt19937 rng(static_cast<unsigned>(n + D + group));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float* mean = pca.books->k_mean.data() + static_cast<size_t>(kLayer) * H * D;
  std::vector<float> k(static_cast<size_t>(n) * H * D), v(k.size()), q(static_cast<size_t>(NH) * D);
  for (size_t e = 0; e < k.size(); ++e) k[e] = mean[e % (H * D)] + normal(rng);
  for (float& x : v) x = normal(rng);
  for (float& x : q) x = 0.3f * normal(rng);
  testing::CodecDecodeCase cc = testing::MakeCodecDecodeCase(codec, kLayer, n, k, v, q);
  testing::DecodeCase& c = cc.gpu;
  c.q_tilde.resize(q.size());
  for (int qh = 0; qh < NH; ++qh) {
    const std::vector<double> qt = PcaQuery(*pca.books, q.data() + static_cast<size_t>(qh) * D, qh / group);
    for (int i = 0; i < D; ++i) c.q_tilde[static_cast<size_t>(qh) * D + i] = static_cast<float>(qt[i]);
  }
  const size_t vbook = static_cast<size_t>(D) << 8;
  c.k_codebook.assign(1, 0.0f);  // replaced by the cache's device books (UsePcaKeys)
  c.v_codebook.assign(pca.books->v_centroids.begin() + kLayer * vbook, pca.books->v_centroids.begin() + (kLayer + 1) * vbook);
  testing::DeviceDecodeCase dev(c);
  const CudaVecInferConstants& vc = pca.cache->vecinfer();
  dev.UsePcaKeys(vc.k_centroids + static_cast<size_t>(kLayer) * H * vbook, vc.k_dims + kLayer * H * mk, mk);
  if (half_values) {
    ASSERT_TRUE(dev.UploadHalfBooks(false));
  }
  dev.PoisonOutput();
  ASSERT_EQ(cuda::LaunchDecodeAttention(cuda::KvPageFormat::kVecInfer, dev.params(), nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> ref(cc.reference.begin(), cc.reference.end());
  EXPECT_LE(testing::RelativeError(dev.Output(), ref), 2e-3)
      << "d=" << D << " mk=" << mk << " gqa=" << group << " n=" << n << (half_values ? " (fp16 values)" : "");
}

TEST(CudaVecInferPcaTest, DecodeMatchesCpuCodec) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int d : {64, 128}) {
    for (int g : {1, 3, 4, 8}) {
      const Pca pca = MakePca(d, g, static_cast<unsigned>(7 * d + g));
      ASSERT_NE(pca.cache, nullptr);
      for (int n : {5, 200, 1000}) {
        for (bool half : {false, true}) CompareDecode(pca, n, half);
      }
    }
  }
}

// 2.375-bit keys (vecinfer-k2.375v2-pca): 19 codes a token at head_dim 64, 38 at 128, the
// kernel's runtime code count.
TEST(CudaVecInferPcaTest, DecodeMatchesCpuCodecAt2375Bits) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int d : {64, 128}) {
    for (int g : {1, 3, 4, 8}) {
      const Pca pca = MakePca(d, g, static_cast<unsigned>(31 + g + d), 2.375f);
      ASSERT_NE(pca.cache, nullptr);
      ASSERT_EQ(pca.cache->vecinfer().k_codes, 19 * d / 64);
      for (int n : {5, 200, 1000}) {
        for (bool half : {false, true}) CompareDecode(pca, n, half);
      }
    }
  }
}

// widths the tensor-core kernel does not take are refused in one line naming the codec: more
// than 40 codes at head_dim 128, 1-bit values, fewer codes than D / 4 off D / 8.
TEST(CudaVecInferPcaTest, RuntimeRefusesOtherCodeCounts) {
  for (const auto& [name, d] : std::vector<std::pair<std::string, int>>{
           {"vecinfer-k2.375v2-pca", 64}, {"vecinfer-k2.375v2-pca", 128}, {"vecinfer-k2.5v2-pca", 128},
           {"vecinfer-k2.75v2-pca", 64}, {"vecinfer-k2v2-pca", 128}}) {
    EXPECT_TRUE(CudaKvCodecSupported(name, d).ok()) << name << " d=" << d;
  }
  for (const auto& [name, d] : std::vector<std::pair<std::string, int>>{
           {"vecinfer-k2.75v2-pca", 128}, {"vecinfer-k2.375v1-pca", 64}, {"vecinfer-k1.5v2-pca", 64}}) {
    const absl::Status st = CudaKvCodecSupported(name, d);
    EXPECT_FALSE(st.ok()) << name << " d=" << d;
    EXPECT_NE(st.message().find(name), std::string::npos) << st;
  }
}

// a -pca layout the tensor-core kernel cannot take (2-dim key sub-vectors) is refused.
TEST(CudaVecInferPcaTest, DecodeRefusesOtherWidths) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const Pca pca = MakePca(64, 3, 1);
  ASSERT_NE(pca.cache, nullptr);
  testing::DecodeCaseSpec spec;
  spec.format = KvPageFormat::kVecInfer;
  spec.num_heads = 6;
  spec.num_kv_heads = 2;
  spec.head_dim = 64;
  spec.lens = {300};
  spec.vq_k_sub_dim = 2;
  spec.vq_v_sub_dim = 2;
  testing::DeviceDecodeCase dev(testing::MakeDecodeCase(spec));
  dev.UsePcaKeys(pca.cache->vecinfer().k_centroids, pca.cache->vecinfer().k_dims);
  const std::string err = cuda::LaunchDecodeAttention(cuda::KvPageFormat::kVecInfer, dev.params(), nullptr);
  EXPECT_NE(err.find("-pca keys need the tensor-core kernel's shapes"), std::string::npos) << err;
}

// the query transform kernel (q~ = T^-1 q with the cache's transposed inverse) against float64.
TEST(CudaVecInferPcaTest, QueryTransformMatchesFloat64) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int d : {64, 128}) {
    const Pca pca = MakePca(d, 3, 5);
    ASSERT_NE(pca.cache, nullptr);
    const int n = 3, NH = pca.shape.num_heads, H = pca.shape.num_kv_heads;
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(n) * NH * d);
    for (float& x : q) x = normal(rng);
    float *dq, *dout;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dq), q.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dout), q.size() * 4), cudaSuccess);
    cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice);
    cuda::VecInferLayerCodec lc;
    lc.k_inverse_t = pca.cache->vecinfer().k_inverse_t + static_cast<size_t>(kLayer) * H * d * d;
    ASSERT_EQ(cuda::LaunchVecInferQueryTransform(dq, static_cast<int64_t>(NH) * d, n, NH, H, d, lc, dout, nullptr), "");
    std::vector<float> out(q.size());
    ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dq);
    cudaFree(dout);
    double worst = 0;
    for (int t = 0; t < n; ++t) {
      for (int qh = 0; qh < NH; ++qh) {
        const size_t at = (static_cast<size_t>(t) * NH + qh) * d;
        const std::vector<double> ref = PcaQuery(*pca.books, q.data() + at, qh / (NH / H));
        for (int i = 0; i < d; ++i) worst = std::max(worst, std::fabs(out[at + i] - ref[i]) / (1.0 + std::fabs(ref[i])));
      }
    }
    EXPECT_LE(worst, 1e-5) << "d=" << d;
  }
}

// the gpu page encoder with the cache's -pca constants against the cpu EncodePage: key codes
// equal except at near-ties (both picks within rounding equally near y = (k - mean) T in
// float64), value codes likewise.
TEST(CudaVecInferPcaTest, EncodeMatchesCpuEncodePage) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [d, k_bits] : std::vector<std::pair<int, float>>{{64, 2.0f}, {128, 2.0f}, {64, 2.375f}, {128, 2.375f}}) {
    const Pca pca = MakePca(d, 2, 11, k_bits);
    ASSERT_NE(pca.cache, nullptr);
    const int H = pca.shape.num_kv_heads, P = 32, mk = pca.mk;
    const VecInferCodebooks& b = *pca.books;
    std::mt19937 rng(static_cast<unsigned>(d));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const float* mean = b.k_mean.data() + static_cast<size_t>(kLayer) * H * d;
    std::vector<float> k(static_cast<size_t>(P) * H * d), v(k.size());
    for (size_t e = 0; e < k.size(); ++e) k[e] = mean[e % (H * d)] + normal(rng);
    for (float& x : v) x = normal(rng);
    std::vector<uint8_t> cpu(pca.codec->LayerPageBytes());
    pca.codec->EncodePage(kLayer, 0, k.data(), v.data(), cpu.data());

    const size_t vbook = static_cast<size_t>(d) << 8;
    std::vector<float> cv(b.v_centroids.begin() + kLayer * vbook, b.v_centroids.begin() + (kLayer + 1) * vbook);
    float *dk, *dv, *dcv;
    uint8_t* ddst;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dk), k.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dv), v.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dcv), vbook * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&ddst), cpu.size()), cudaSuccess);
    cudaMemcpy(dk, k.data(), k.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dv, v.data(), v.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dcv, cv.data(), vbook * 4, cudaMemcpyHostToDevice);
    cudaMemset(ddst, 0xAB, cpu.size());
    const CudaVecInferConstants& vc = pca.cache->vecinfer();
    cuda::VecInferEncodeParams ep;
    ep.k = dk;
    ep.v = dv;
    ep.k_transform = vc.k_transform + static_cast<size_t>(kLayer) * H * d * d;
    ep.k_dims = vc.k_dims + kLayer * H * mk;
    ep.k_codes = mk;
    ep.k_codebook = vc.k_centroids + static_cast<size_t>(kLayer) * H * vbook;
    ep.k_codebook_head_stride = static_cast<int64_t>(vbook);
    ep.v_codebook = dcv;
    ep.num_kv_heads = H;
    ep.head_dim = d;
    ep.dst = ddst;
    ASSERT_EQ(cuda::LaunchVecInferEncodePage(ep, nullptr), "");
    std::vector<uint8_t> gpu(cpu.size());
    ASSERT_EQ(cudaMemcpy(gpu.data(), ddst, gpu.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (void* ptr : {static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dcv), static_cast<void*>(ddst)}) {
      cudaFree(ptr);
    }
    int mismatches = 0;
    for (int h = 0; h < H; ++h) {
      const size_t at = static_cast<size_t>(kLayer) * H + h;
      const float* t = b.k_transform.data() + at * d * d;
      const float* book = b.k_centroids.data() + at * vbook;
      const int32_t* dims = b.k_dims.data() + at * mk;
      for (int tok = 0; tok < P; ++tok) {
        std::vector<double> y(d, 0.0);
        const float* kt = &k[(static_cast<size_t>(tok) * H + h) * d];
        for (int i = 0; i < d; ++i) {
          for (int j = 0; j < d; ++j) y[j] += (static_cast<double>(kt[i]) - mean[h * d + i]) * t[i * d + j];
        }
        const size_t row = (static_cast<size_t>(h) * P + tok) * mk;
        for (int m = 0, off = 0; m < mk; off += dims[m], ++m) {
          const int ca = cpu[row + m], cg = gpu[row + m];
          if (ca == cg) continue;
          ++mismatches;
          double da = 0, dg = 0;
          for (int j = 0; j < dims[m]; ++j) {
            const double xa = y[off + j] - book[(static_cast<size_t>(off) << 8) + ca * dims[m] + j];
            const double xg = y[off + j] - book[(static_cast<size_t>(off) << 8) + cg * dims[m] + j];
            da += xa * xa;
            dg += xg * xg;
          }
          EXPECT_LE(std::fabs(dg - da), 1e-4 * (da + 1e-3)) << "d=" << d << " head " << h << " m " << m;
        }
      }
    }
    EXPECT_LE(mismatches, 2 * H * P * mk / 100) << "d=" << d;
    // the value codes: the base codec's, unchanged by -pca.
    const size_t vstart = static_cast<size_t>(H) * P * mk;
    int vmis = 0;
    for (size_t e = vstart; e < cpu.size(); ++e) vmis += cpu[e] != gpu[e];
    EXPECT_LE(vmis, 2 * H * P * mk / 100) << "d=" << d;
  }
}

}  // namespace
}  // namespace vqserve
