// the block-weight multiply (kernels/cuda/weights/block_weights.h: y (n, rows) fp32 =
// x (n, cols) fp16 . w (rows, cols)ᵀ, w in a ggml block format) at the decode-step shapes of
// Llama-3.1-8B in llama.cpp's Q4_K_M types (q+k and gate+up fused as the runtime multiplies
// them), n columns of x. weights rotate through copies that overflow the L2, as the layers of a
// model do; random blocks (speed does not depend on the values). prints a markdown table: µs a
// call (median of 50 after 5, each between two events, the launch included), the weight bytes'
// GB/s and % of the copy ceiling. without a cuda device it says so, exit 0.
// usage: block_weights_bench [columns (1,2,4,8,16)] [matrix name filter (a substring)]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cuda/gpu_timing.h"
#include "kernels/cuda/weights/block_weights.h"

namespace {

using vqserve::cuda::BlockFormat;

struct Shape {
  const char* name;
  BlockFormat format;
  int rows, cols;
};

constexpr Shape kShapes[] = {
    {"q+k", BlockFormat::kQ4_K, 5120, 4096},
    {"v", BlockFormat::kQ6_K, 1024, 4096},
    {"o", BlockFormat::kQ4_K, 4096, 4096},
    {"gate+up", BlockFormat::kQ4_K, 28672, 4096},
    {"down (q4_k)", BlockFormat::kQ4_K, 4096, 14336},
    {"down (q6_k)", BlockFormat::kQ6_K, 4096, 14336},
    {"head", BlockFormat::kQ6_K, 128256, 4096},
};

const char* FormatName(BlockFormat f) {
  switch (f) {
    case BlockFormat::kQ4_K: return "q4_k";
    case BlockFormat::kQ6_K: return "q6_k";
    default: return "?";
  }
}

std::vector<int> ParseColumns(const char* arg) {
  std::vector<int> out;
  std::stringstream ss(arg);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("block_weights_bench: no cuda device\n");
    return 0;
  }
  const std::vector<int> columns = ParseColumns(argc > 1 ? argv[1] : "1,2,4,8,16");
  const std::string filter = argc > 2 ? argv[2] : "";
  const double ceiling = vqserve::bench::CopyCeiling(size_t{1} << 30);
  std::printf("copy ceiling %.0f GB/s (read + write)\n\n", ceiling / 1e9);
  std::printf("| matrix | format | rows x cols | MB | n | µs | GB/s | %% of copy |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  constexpr int kMaxColumns = 16;
  for (const Shape& s : kShapes) {
    if (std::string(s.name).find(filter) == std::string::npos) continue;
    const int64_t bytes = vqserve::cuda::BlockRowBytes(s.format, s.cols) * s.rows;
    const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{400} << 20) / bytes));
    std::vector<uint8_t*> w(copies);
    for (int c = 0; c < copies; ++c) {
      VQ_CUDA_CHECK(cudaMalloc(&w[c], bytes));
      const std::string err = vqserve::cuda::LaunchFillRandomBlocks(s.format, w[c], s.rows, s.cols,
                                                                    0.05f, 17 + c, nullptr);
      if (!err.empty()) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
    }
    __half* x;
    float* y;
    void* scratch;
    VQ_CUDA_CHECK(cudaMalloc(&x, sizeof(__half) * kMaxColumns * s.cols));
    VQ_CUDA_CHECK(cudaMalloc(&y, sizeof(float) * kMaxColumns * s.rows));
    VQ_CUDA_CHECK(cudaMalloc(&scratch, vqserve::cuda::BlockGemvScratchBytes(s.cols)));
    std::vector<__half> hx(size_t{kMaxColumns} * s.cols);
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = __float2half(((i * 7919) % 2001) / 1000.0f - 1.0f);
    VQ_CUDA_CHECK(cudaMemcpy(x, hx.data(), hx.size() * sizeof(__half), cudaMemcpyHostToDevice));
    for (int n : columns) {
      const double ms = vqserve::bench::MedianEventMs(5, 50, [&](int i) {
        const std::string err = vqserve::cuda::LaunchBlockGemv(
            s.format, w[i % copies], s.rows, s.cols, x, s.cols, n, y, s.rows, false, scratch,
            nullptr);
        if (!err.empty()) { std::fprintf(stderr, "%s\n", err.c_str()); std::exit(1); }
      });
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      std::printf("| %s | %s | %d x %d | %.1f | %d | %.1f | %.0f | %.0f |\n", s.name,
                  FormatName(s.format), s.rows, s.cols, bytes / 1e6, n, ms * 1e3, gbs,
                  100.0 * gbs * 1e9 / ceiling);
    }
    for (uint8_t* p : w) VQ_CUDA_CHECK(cudaFree(p));
    VQ_CUDA_CHECK(cudaFree(x));
    VQ_CUDA_CHECK(cudaFree(y));
    VQ_CUDA_CHECK(cudaFree(scratch));
  }
  return 0;
}
