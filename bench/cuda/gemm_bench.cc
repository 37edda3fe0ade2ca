// the decode-step gemms of the cuda runtime (runtime/cuda/cuda_llama_model.cc: y (n, rows) fp32 =
// x (n, cols) fp16 . w (rows, cols)ᵀ fp16) at the layer shapes of Llama-3.1-8B and SmolLM2-135M,
// n = 1, 16, 32 tokens: the runtime's call (cublasGemmEx, fp32 output, CUBLAS_GEMM_DEFAULT)
// beside every algorithm cublasLt's heuristic offers for the same types (each timed, the
// fastest kept), and fp16 output for reference. weights rotate through copies that overflow
// the L2, as the layers of a model do. prints a markdown table: µs, weight GB/s, % of the copy
// ceiling. each time is one call between two events, the host's launch overhead included (a
// graph-replayed step does not pay it). without a cuda device it says so, exit 0.
// usage: gemm_bench [max_algos (16)]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cuda/gpu_timing.h"

namespace {

#define BLAS_CHECK(x)                                                                   \
  do {                                                                                  \
    cublasStatus_t st_ = (x);                                                           \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d: cublas status %d\n", __FILE__, __LINE__, int(st_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

struct Shape {
  const char* model;
  const char* name;
  int cols, rows;  // k (input features), output features
  bool accumulate;
};

constexpr size_t kWorkspace = size_t{32} << 20;  // the runtime's cuBLAS workspace (graphs)

// one weight shape: `copies` weights of rows x cols fp16, walked in turn.
struct Weights {
  std::vector<__half*> w;
  Weights(const Shape& s, size_t min_bytes) {
    const size_t bytes = size_t(s.rows) * s.cols * 2;
    const size_t copies = std::max<size_t>(2, (min_bytes + bytes - 1) / bytes);
    for (size_t i = 0; i < copies; ++i) {
      __half* p;
      VQ_CUDA_CHECK(cudaMalloc(&p, bytes));
      VQ_CUDA_CHECK(cudaMemset(p, 0x11, bytes));  // 0x1111: a small fp16 value
      w.push_back(p);
    }
  }
  ~Weights() {
    for (__half* p : w) cudaFree(p);
  }
};

// the fastest of cublasLt's heuristic algorithms for this shape (µs and its rank, -1 if none).
std::pair<double, int> BestLt(cublasLtHandle_t lt, const Shape& s, int n, const Weights& w, const __half* x,
                              float* y, void* ws, int max_algos) {
  cublasLtMatmulDesc_t desc;
  BLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  BLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  BLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtMatrixLayout_t la, lb, lc;  // column-major: w (cols, rows), x (cols, n), y (rows, n)
  BLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.cols, s.rows, s.cols));
  BLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, s.cols, n, s.cols));
  BLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.rows, n, s.rows));
  cublasLtMatmulPreference_t pref;
  BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                  sizeof(kWorkspace)));
  std::vector<cublasLtMatmulHeuristicResult_t> res(max_algos);
  int got = 0;
  BLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, max_algos, res.data(), &got));
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  std::pair<double, int> best = {1e30, -1};
  for (int a = 0; a < got; ++a) {
    if (res[a].state != CUBLAS_STATUS_SUCCESS) continue;
    const double ms = vqserve::bench::MedianEventMs(5, 30, [&](int i) {
      BLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, w.w[i % w.w.size()], la, x, lb, &beta, y, lc, y, lc,
                                &res[a].algo, ws, kWorkspace, 0));
    });
    if (ms * 1e3 < best.first) best = {ms * 1e3, a};
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("gemm_bench: no cuda device, nothing measured\n");
    return 0;
  }
  const int max_algos = argc > 1 ? std::atoi(argv[1]) : 16;
  const double ceiling = vqserve::bench::CopyCeiling(size_t{4} << 30);
  std::printf("copy ceiling (read+write): %.1f GB/s\n\n", ceiling / 1e9);
  const std::vector<Shape> shapes = {
      {"llama8b", "qkv", 4096, 6144, false},        {"llama8b", "wo", 4096, 4096, true},
      {"llama8b", "gate_up", 4096, 28672, false},   {"llama8b", "down", 14336, 4096, true},
      {"llama8b", "lm_head", 4096, 128256, false},  {"smollm2", "qkv", 576, 960, false},
      {"smollm2", "wo", 576, 576, true},            {"smollm2", "gate_up", 576, 3072, false},
      {"smollm2", "down", 1536, 576, true},         {"smollm2", "lm_head", 576, 49152, false},
  };
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  BLAS_CHECK(cublasCreate(&blas));
  BLAS_CHECK(cublasLtCreate(&lt));
  void* ws;
  VQ_CUDA_CHECK(cudaMalloc(&ws, kWorkspace));
  BLAS_CHECK(cublasSetWorkspace(blas, ws, kWorkspace));
  __half* x;
  float* y;
  __half* y16;
  VQ_CUDA_CHECK(cudaMalloc(&x, size_t{32} * 14336 * 2));
  VQ_CUDA_CHECK(cudaMemset(x, 0x11, size_t{32} * 14336 * 2));
  VQ_CUDA_CHECK(cudaMalloc(&y, size_t{32} * 128256 * 4));
  VQ_CUDA_CHECK(cudaMalloc(&y16, size_t{32} * 128256 * 2));
  std::printf("| model | gemm | k x n_out | n | runtime GemmEx µs (GB/s, %% copy) | best cublasLt µs (GB/s, %% copy) "
              "[rank] | Lt speed-up | fp16-out GemmEx µs |\n|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    Weights w(s, size_t{192} << 20);  // > the 50 MB L2 several times over
    const double wbytes = double(s.rows) * s.cols * 2;
    for (int n : {1, 16, 32}) {
      const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
      const double ex = 1e3 * vqserve::bench::MedianEventMs(5, 30, [&](int i) {
        BLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, s.rows, n, s.cols, &alpha, w.w[i % w.w.size()],
                                CUDA_R_16F, s.cols, x, CUDA_R_16F, s.cols, &beta, y, CUDA_R_32F, s.rows,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      const std::pair<double, int> lt_best = BestLt(lt, s, n, w, x, y, ws, max_algos);
      const __half a16 = __float2half(1.0f), b16 = __float2half(s.accumulate ? 1.0f : 0.0f);
      const double h = 1e3 * vqserve::bench::MedianEventMs(5, 30, [&](int i) {
        BLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, s.rows, n, s.cols, &a16, w.w[i % w.w.size()],
                                CUDA_R_16F, s.cols, x, CUDA_R_16F, s.cols, &b16, y16, CUDA_R_16F, s.rows,
                                CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
      });
      auto gbs = [&](double us) { return wbytes / (us * 1e-6) / 1e9; };
      std::printf("| %s | %s | %d x %d | %d | %.1f (%.0f, %.0f%%) | %.1f (%.0f, %.0f%%) [%d] | %.2fx | %.1f |\n",
                  s.model, s.name, s.cols, s.rows, n, ex, gbs(ex), 100.0 * gbs(ex) * 1e9 / ceiling, lt_best.first,
                  gbs(lt_best.first), 100.0 * gbs(lt_best.first) * 1e9 / ceiling, lt_best.second,
                  ex / lt_best.first, h);
      std::fflush(stdout);
    }
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(y16);
  cudaFree(ws);
  cublasLtDestroy(lt);
  cublasDestroy(blas);
  return 0;
}
