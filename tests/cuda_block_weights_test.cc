// the resident weight formats on the gpu (kernels/cuda/weights/, runtime/cuda/
// cuda_weight_matrix.h) against the cpu's dequantization (runtime/gguf Dequantize) and a float64
// matmul, in the spirit of cuda_backend_ops_test: one table row per (format, rows, cols, batch)
// for the fused dequantize-and-multiply kernel, the fp16 dequantization and the embedding
// gather; then a stacked matrix of three formats (q4_k, q6_k, f32 -> fp16) read from a gguf,
// multiplied through the fused kernel and through row tiles of the fp16 scratch with cublas.
// skips without a cuda device.
#include <gtest/gtest.h>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/weights/block_weights.h"
#include "runtime/cuda/cuda_device_array.h"
#include "runtime/cuda/cuda_weight_matrix.h"
#include "runtime/gguf/ggml_type.h"
#include "tests/test_paths.h"
#include "tests/util/cuda_device.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/random_blocks.h"

namespace vqserve {
namespace {

struct Case {
  GgmlType type;
  int rows, cols, batch;
};

// shapes of the default model (576 columns: 18 of the kernels' 32-element vectors, not whole
// groups of 4 for the tensor-core pass; 1536) and the 8b (4096 columns is 128 vectors, one a
// thread of the integer gemv; 14336 is 448, 3.5 a thread), rows not a multiple of the
// gemv's 8 or the tensor-core pass's 16 / 32 rows a block, batches across the column templates
// (integers up to 2, tensor cores 3..16) and the passes of 16; AllCases adds every batch 1..16 of
// every format.
const Case kCases[] = {
    {GgmlType::kQ8_0, 37, 576, 1},   {GgmlType::kQ8_0, 64, 1536, 16}, {GgmlType::kQ8_0, 9, 576, 33},
    {GgmlType::kQ4_0, 37, 576, 1},   {GgmlType::kQ4_0, 70, 576, 3},   {GgmlType::kQ4_0, 16, 1536, 17},
    {GgmlType::kQ4_1, 37, 576, 1},   {GgmlType::kQ4_1, 70, 1536, 8},  {GgmlType::kQ4_1, 13, 576, 32},
    {GgmlType::kQ4_K, 37, 4096, 1},  {GgmlType::kQ4_K, 70, 512, 2},   {GgmlType::kQ4_K, 21, 14336, 16},
    {GgmlType::kQ4_K, 10, 1536, 20}, {GgmlType::kQ5_K, 37, 512, 1},   {GgmlType::kQ5_K, 70, 4096, 7},
    {GgmlType::kQ5_K, 11, 1536, 16}, {GgmlType::kQ6_K, 37, 4096, 1},  {GgmlType::kQ6_K, 70, 512, 4},
    {GgmlType::kQ6_K, 21, 14336, 16}, {GgmlType::kQ6_K, 9, 1536, 32},
    {GgmlType::kQ4_K, 6, 14336, 1},  {GgmlType::kQ6_K, 5, 14336, 3},  {GgmlType::kQ8_0, 7, 14336, 2},
    {GgmlType::kQ4_K, 9, 14336, 5},  {GgmlType::kQ5_K, 3, 14336, 4},  {GgmlType::kQ4_0, 5, 14336, 1},
    {GgmlType::kQ6_K, 100, 1536, 12}, {GgmlType::kQ4_1, 33, 576, 9},
    // 8192 rows and more: the tensor-core pass's 32-row blocks (16 below).
    {GgmlType::kQ4_K, 8230, 256, 16}, {GgmlType::kQ6_K, 8200, 256, 5},
};

// kCases, then each format at every batch 1..16 (rows 5..7, 768 columns: 24 vectors, fewer
// than the gemv block's threads).
std::vector<Case> AllCases() {
  std::vector<Case> all(std::begin(kCases), std::end(kCases));
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                     GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    for (int n = 1; n <= 16; ++n) all.push_back({t, 5 + n % 3, 768, n});
  }
  return all;
}

std::vector<float> DequantizeRows(GgmlType type, const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> out(n);
  Dequantize(type, b.data(), out.data(), n);
  return out;
}

// x (n, cols) fp16 bits, uniform in ±1.
std::vector<uint16_t> RandomHalves(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> x(count);
  for (uint16_t& h : x) h = FloatToHalf(u(rng));
  return x;
}

std::vector<float> ToFloats(const std::vector<uint16_t>& x) {
  std::vector<float> f(x.size());
  for (size_t i = 0; i < x.size(); ++i) f[i] = HalfToFloat(x[i]);
  return f;
}

// x as the integer gemv multiplies it (block_weights.h): each run of 16 elements quantized to
// int8 (d = max |x| / 127, q = x (127 / max |x|) rounded to nearest even, the fp32 operations
// the kernel does) and scaled back, d q, in float64.
std::vector<double> QuantizedRuns(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (size_t r0 = 0; r0 < x.size(); r0 += 16) {
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[r0 + i]));
    const float d = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < 16; ++i) {
      const float scaled = x[r0 + i] * inv;
      out[r0 + i] = double(d) * std::nearbyint(scaled);
    }
  }
  return out;
}

// ref (n, rows) = y0 + x · wᵀ in float64 over the cpu's dequantized weights.
template <class X>
std::vector<double> Reference(const std::vector<float>& w, const std::vector<X>& x,
                              const std::vector<float>& y0, int rows, int cols, int n) {
  std::vector<double> ref(size_t(n) * rows);
  for (int j = 0; j < n; ++j) {
    for (int r = 0; r < rows; ++r) {
      double s = y0.empty() ? 0.0 : y0[size_t(j) * rows + r];
      for (int k = 0; k < cols; ++k) {
        s += double(w[size_t(r) * cols + k]) * double(x[size_t(j) * cols + k]);
      }
      ref[size_t(j) * rows + r] = s;
    }
  }
  return ref;
}

// ||got - ref|| / ||ref||.
double RelativeError(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// relative error allowed: fp32 rounding for the integer kernel (batches up to
// kBlockGemvIntColumns) against x as it quantizes it (QuantizedRuns); fp16 rounding of the
// weights where a product goes through tensor cores (wider batches) or the fp16 scratch
// (CudaWeightMatrix above kBlockGemvMaxColumns columns), as the fp16 weights' cublas path.
constexpr double kFp32Rounding = 1e-5, kFp16Weights = 3e-3;
// the int8 runs against x itself: each element off by up to d / 2 (about 0.4 % of the run's
// largest), so about 0.4 % of a dot product of x uniform in ±1.
constexpr double kInt8Activations = 1e-2;

template <class T>
void ToDevice(const std::vector<T>& host, DeviceArray<T>* dev) { dev->Upload(host); }

class CudaBlockWeightsTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaBlockWeightsTest, KernelsMatchCpuDequantizeAndFloat64Matmul) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const Case c = GetParam();
  const char* name = GetTypeTraits(static_cast<uint32_t>(c.type)).name;
  const auto format = static_cast<cuda::BlockFormat>(static_cast<int>(c.type));
  std::mt19937 rng(1000 + c.rows + c.cols + c.batch);
  const std::vector<uint8_t> blocks = testing::RandomBlockRows(c.type, c.rows, c.cols, rng);
  const std::vector<float> w = DequantizeRows(c.type, blocks, int64_t{c.rows} * c.cols);
  const std::vector<uint16_t> x = RandomHalves(int64_t{c.batch} * c.cols, rng);
  DeviceArray<uint8_t> dw;
  DeviceArray<uint16_t> dx;
  ToDevice(blocks, &dw);
  ToDevice(x, &dx);
  const auto* xh = reinterpret_cast<const __half*>(dx.data());

  // the fused kernel into columns [3, 3 + rows) of y (n, rows + 8), overwriting then adding;
  // the other columns keep their poison.
  const int ldy = c.rows + 8, off = 3;
  for (bool accumulate : {false, true}) {
    std::vector<float> y0(size_t(c.batch) * ldy);
    for (float& v : y0) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    DeviceArray<float> dy;
    ToDevice(y0, &dy);
    DeviceArray<uint8_t> scratch;
    scratch.Reserve(size_t(cuda::BlockGemvScratchBytes(c.cols)));
    ASSERT_EQ(cuda::LaunchBlockGemv(format, dw.data(), c.rows, c.cols, xh, c.cols, c.batch,
                                    dy.data() + off, ldy, accumulate, scratch.data(), nullptr),
              "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = dy.Download();
    std::vector<float> got, base;
    for (int j = 0; j < c.batch; ++j) {
      for (int i = 0; i < ldy; ++i) {
        const size_t at = size_t(j) * ldy + i;
        if (i >= off && i < off + c.rows) {
          got.push_back(y[at]);
          base.push_back(y0[at]);
        } else {
          ASSERT_EQ(y[at], y0[at]) << name << ": column " << i << " outside the rows changed";
        }
      }
    }
    const std::vector<float> xf = ToFloats(x), y00 = accumulate ? base : std::vector<float>();
    const bool ints = c.batch <= cuda::kBlockGemvIntColumns;
    const std::vector<double> ref =
        ints ? Reference(w, QuantizedRuns(xf), y00, c.rows, c.cols, c.batch)
             : Reference(w, xf, y00, c.rows, c.cols, c.batch);
    EXPECT_LE(RelativeError(got, ref), ints ? kFp32Rounding : kFp16Weights)
        << name << " rows " << c.rows << " cols " << c.cols << " batch " << c.batch
        << (accumulate ? " accumulate" : "");
    if (ints) {
      EXPECT_LE(RelativeError(got, Reference(w, xf, y00, c.rows, c.cols, c.batch)),
                kInt8Activations)
          << name << " against x unquantized";
    }
  }

  // dequantized to fp16: the cpu's values rounded to fp16 (one fp16 ulp where the gpu's fused
  // multiply-add rounds the fp32 value differently).
  DeviceArray<__half> dh;
  dh.Reserve(size_t(c.rows) * c.cols);
  ASSERT_EQ(cuda::LaunchDequantizeToHalf(format, dw.data(), c.rows, c.cols, dh.data(), nullptr), "");
  std::vector<__half> h = dh.Download();
  for (size_t i = 0; i < w.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &h[i], 2);
    ASSERT_NEAR(HalfToFloat(bits), HalfToFloat(FloatToHalf(w[i])),
                std::fabs(w[i]) * 1e-3 + 1e-7)
        << name << " element " << i;
  }

  // the gather: rows ids of the cpu's values, in fp32.
  std::vector<int32_t> ids = {c.rows - 1, 0, c.rows / 2, 0};
  DeviceArray<int32_t> dids;
  ToDevice(ids, &dids);
  DeviceArray<float> dg;
  dg.Reserve(ids.size() * c.cols);
  ASSERT_EQ(cuda::LaunchGatherRows(format, dw.data(), dids.data(), static_cast<int>(ids.size()),
                                   c.cols, dg.data(), nullptr),
            "");
  const std::vector<float> g = dg.Download();
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int k = 0; k < c.cols; ++k) {
      const float want = w[size_t(ids[i]) * c.cols + k];
      ASSERT_NEAR(g[i * c.cols + k], want, 1e-6 * std::max(1.0f, std::fabs(want)))
          << name << " gather row " << ids[i] << " element " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaBlockWeightsTest, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return std::string(GetTypeTraits(uint32_t(c.type)).name) + "_r" +
                                  std::to_string(c.rows) + "_c" + std::to_string(c.cols) +
                                  "_b" + std::to_string(c.batch);
                         });

// q4_k, q6_k and f32 tensors stacked into one matrix (three segments: blocks, blocks, fp16);
// every batch size through Multiply, with the least scratch the matrix takes (the prefill
// path's row tiles of 16 rows).
TEST(CudaWeightMatrixTest, StackedFormatsMultiplyLikeFloat64) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const int cols = 512;
  const struct { const char* name; GgmlType type; int rows; } parts[] = {
      {"a", GgmlType::kQ4_K, 20}, {"b", GgmlType::kQ6_K, 12}, {"c", GgmlType::kF32, 8}};
  std::mt19937 rng(28);
  testing::GgufWriter gw;
  gw.AddString("general.architecture", "llama");
  std::vector<float> w;  // the stacked matrix as the cpu dequantizes it; f32 rounded to fp16
  for (const auto& p : parts) {
    std::vector<uint8_t> bytes;
    if (p.type == GgmlType::kF32) {
      std::vector<float> f(size_t(p.rows) * cols);
      for (float& v : f) v = std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng);
      bytes.resize(f.size() * 4);
      std::memcpy(bytes.data(), f.data(), bytes.size());
      for (float v : f) w.push_back(HalfToFloat(FloatToHalf(v)));
    } else {
      bytes = testing::RandomBlockRows(p.type, p.rows, cols, rng);
      const std::vector<float> d = DequantizeRows(p.type, bytes, int64_t{p.rows} * cols);
      w.insert(w.end(), d.begin(), d.end());
    }
    gw.AddTensor(p.name, {cols, p.rows}, p.type, bytes);
  }
  const std::string path = ::testing::TempDir() + "cuda_weight_matrix_test.gguf";
  gw.WriteFile(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  CudaWeightMatrix m;
  for (const auto& p : parts) ASSERT_TRUE(m.Append(**file, p.name, p.rows, cols, true).ok());
  m.Upload();
  const int rows = m.rows();
  ASSERT_EQ(rows, 40);
  EXPECT_EQ(m.bytes(), 20 * 2 * 144 + 12 * 2 * 210 + 8 * cols * 2);
  // the block gemv's scratch (the tensor-core pass's x permuted: 16 columns of fp16) is more
  // than the 3 rows asked for
  const int64_t halves = m.ScratchWanted(3 * cols);
  EXPECT_EQ(halves, 16 * cols);
  EXPECT_EQ(2 * halves, cuda::BlockGemvScratchBytes(cols));
  cublasHandle_t blas;
  ASSERT_EQ(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
  DeviceArray<__half> scratch;
  scratch.Reserve(size_t(halves));
  CudaMatmulContext ctx;
  ctx.blas = blas;
  ctx.scratch = scratch.data();
  ctx.scratch_halves = halves;
  for (int n : {1, 5, 16, 17, 40}) {
    const std::vector<uint16_t> x = RandomHalves(int64_t{n} * cols, rng);
    DeviceArray<uint16_t> dx;
    ToDevice(x, &dx);
    DeviceArray<float> dy;
    dy.Reserve(size_t(n) * rows);
    m.Multiply(reinterpret_cast<const __half*>(dx.data()), n, dy.data(), false, ctx);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = dy.Download();
    // the f32 segment multiplies x itself (cublas), the block ones x's int8 runs up to
    // kBlockGemvIntColumns columns: all against x unquantized.
    EXPECT_LE(RelativeError(std::vector<float>(y.begin(), y.begin() + size_t(n) * rows),
                            Reference(w, ToFloats(x), {}, rows, cols, n)),
              n <= cuda::kBlockGemvIntColumns ? kInt8Activations : kFp16Weights)
        << "batch " << n;
  }
  cublasDestroy(blas);
}

}  // namespace
}  // namespace vqserve
