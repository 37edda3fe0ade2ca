// the block-weight kernels (block_weights.h): one warp per weight row for the fused
// dequantize-and-multiply, one thread per 8-element chunk for the dequantization and gather.
#include "kernels/cuda/weights/block_weights.h"

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kGemvWarps = 4;  // weight rows per block of the gemv
constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65536;

int GridFor(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? (b > 0 ? b : 1) : kMaxBlocks);
}

// y (n, ldy) (+)= x (n, ldx) · w (rows, cols)ᵀ for n <= NB columns. grid: rows / kGemvWarps
// blocks of kGemvWarps warps; warp = row r; lane l takes chunks l, l + 32, ... of the row:
// dequantizes its 8 weights once and multiplies them with the same 8 elements of each column
// of x (16-byte loads), in fp32; the lanes' partial sums meet in a warp reduction.
template <BlockFormat F, int NB>
__global__ void __launch_bounds__(kGemvWarps * 32)
    BlockGemvKernel(const uint8_t* __restrict__ w, int rows, int cols,
                    const __half* __restrict__ x, int64_t ldx, int n, float* __restrict__ y,
                    int64_t ldy, bool accumulate) {
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * kGemvWarps + (threadIdx.x >> 5);
  if (r >= rows) return;
  constexpr int kBlock = BlockTraits<F>::kBlock, kBytes = BlockTraits<F>::kBytes;
  const uint8_t* row = w + int64_t{r} * (cols / kBlock) * kBytes;
  const int chunks = cols / 8;
  float acc[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) acc[j] = 0.0f;
  for (int c = lane; c < chunks; c += 32) {
    float wv[8];
    Dequant8<F>(row, c, wv);
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      if (j < n) {
        const uint4 raw = *reinterpret_cast<const uint4*>(x + j * ldx + 8 * int64_t{c});
        const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __half22float2(h[i]);
          acc[j] = fmaf(wv[2 * i], f.x, acc[j]);
          acc[j] = fmaf(wv[2 * i + 1], f.y, acc[j]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < NB; ++j) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      if (j < n) {
        float* out = y + j * ldy + r;
        *out = accumulate ? *out + acc[j] : acc[j];
      }
    }
  }
}

template <BlockFormat F>
void GemvPass(const uint8_t* w, int rows, int cols, const __half* x, int64_t ldx, int n,
              float* y, int64_t ldy, bool accumulate, cudaStream_t stream) {
  const dim3 grid((rows + kGemvWarps - 1) / kGemvWarps), block(kGemvWarps * 32);
  if (n <= 1) {
    BlockGemvKernel<F, 1><<<grid, block, 0, stream>>>(w, rows, cols, x, ldx, n, y, ldy, accumulate);
  } else if (n <= 2) {
    BlockGemvKernel<F, 2><<<grid, block, 0, stream>>>(w, rows, cols, x, ldx, n, y, ldy, accumulate);
  } else if (n <= 4) {
    BlockGemvKernel<F, 4><<<grid, block, 0, stream>>>(w, rows, cols, x, ldx, n, y, ldy, accumulate);
  } else if (n <= 8) {
    BlockGemvKernel<F, 8><<<grid, block, 0, stream>>>(w, rows, cols, x, ldx, n, y, ldy, accumulate);
  } else {
    BlockGemvKernel<F, 16><<<grid, block, 0, stream>>>(w, rows, cols, x, ldx, n, y, ldy,
                                                       accumulate);
  }
}

// out (rows, cols) fp16: thread = one 8-element chunk, one 16-byte store.
template <BlockFormat F>
__global__ void DequantizeToHalfKernel(const uint8_t* __restrict__ w, int64_t rows, int cols,
                                       __half* __restrict__ out) {
  constexpr int kBlock = BlockTraits<F>::kBlock, kBytes = BlockTraits<F>::kBytes;
  const int chunks = cols / 8;
  const int64_t row_bytes = int64_t{cols / kBlock} * kBytes;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < rows * chunks;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = t / chunks;
    const int c = static_cast<int>(t % chunks);
    float v[8];
    Dequant8<F>(w + r * row_bytes, c, v);
    uint4 packed;
    __half2* h = reinterpret_cast<__half2*>(&packed);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(out + r * cols + 8 * c) = packed;
  }
}

// out (n, cols) fp32: thread = one 8-element chunk of row ids[i].
template <BlockFormat F>
__global__ void GatherRowsKernel(const uint8_t* __restrict__ w, const int32_t* __restrict__ ids,
                                 int n, int cols, float* __restrict__ out) {
  constexpr int kBlock = BlockTraits<F>::kBlock, kBytes = BlockTraits<F>::kBytes;
  const int chunks = cols / 8;
  const int64_t row_bytes = int64_t{cols / kBlock} * kBytes;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < int64_t{n} * chunks;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = t / chunks;
    const int c = static_cast<int>(t % chunks);
    float v[8];
    Dequant8<F>(w + ids[i] * row_bytes, c, v);
    float4* o = reinterpret_cast<float4*>(out + i * cols + 8 * c);
    o[0] = make_float4(v[0], v[1], v[2], v[3]);
    o[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

__device__ __forceinline__ uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ void PutHalf(uint8_t* p, float v) {
  const uint16_t h = __half_as_ushort(__float2half_rn(v));
  p[0] = static_cast<uint8_t>(h);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// thread = one block: random bytes, then the scale fields (d, and the min where there is one).
__global__ void FillRandomBlocksKernel(BlockFormat f, uint8_t* w, int64_t blocks, int bytes,
                                       float amplitude, uint64_t seed) {
  const uint64_t key = Mix(seed);
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < blocks;
       k += int64_t{gridDim.x} * blockDim.x) {
    uint8_t* b = w + k * bytes;
    uint64_t h = 0;
    for (int i = 0; i < bytes; ++i) {
      if (i % 8 == 0) h = Mix(key ^ static_cast<uint64_t>(k * bytes + i));
      b[i] = static_cast<uint8_t>(h >> (8 * (i % 8)));
    }
    const float a = amplitude;
    switch (f) {
      case BlockFormat::kQ8_0: PutHalf(b, a / 127.0f); break;
      case BlockFormat::kQ4_0: PutHalf(b, a / 8.0f); break;
      case BlockFormat::kQ4_1: PutHalf(b, 2.0f * a / 15.0f); PutHalf(b + 2, -a); break;
      case BlockFormat::kQ4_K: PutHalf(b, 2.0f * a / (63.0f * 15.0f)); PutHalf(b + 2, a / 63.0f); break;
      case BlockFormat::kQ5_K: PutHalf(b, 2.0f * a / (63.0f * 31.0f)); PutHalf(b + 2, a / 63.0f); break;
      case BlockFormat::kQ6_K: PutHalf(b + 208, a / (128.0f * 32.0f)); break;
    }
  }
}

}  // namespace

#define VQ_BLOCK_FORMAT_SWITCH(format, CALL)                        \
  switch (format) {                                                 \
    case BlockFormat::kQ4_0: { constexpr auto F = BlockFormat::kQ4_0; CALL; } break; \
    case BlockFormat::kQ4_1: { constexpr auto F = BlockFormat::kQ4_1; CALL; } break; \
    case BlockFormat::kQ8_0: { constexpr auto F = BlockFormat::kQ8_0; CALL; } break; \
    case BlockFormat::kQ4_K: { constexpr auto F = BlockFormat::kQ4_K; CALL; } break; \
    case BlockFormat::kQ5_K: { constexpr auto F = BlockFormat::kQ5_K; CALL; } break; \
    case BlockFormat::kQ6_K: { constexpr auto F = BlockFormat::kQ6_K; CALL; } break; \
    default: return "unknown block format";                         \
  }

std::string LaunchBlockGemv(BlockFormat format, const uint8_t* w, int rows, int cols,
                            const __half* x, int64_t ldx, int n, float* y, int64_t ldy,
                            bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return "";
  if (cols % BlockElements(format) != 0 || ldx % 8 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return "LaunchBlockGemv: cols must be a multiple of the block size, x 16-byte aligned";
  }
  for (int j0 = 0; j0 < n; j0 += kBlockGemvMaxColumns) {
    const int nj = n - j0 < kBlockGemvMaxColumns ? n - j0 : kBlockGemvMaxColumns;
    VQ_BLOCK_FORMAT_SWITCH(format, GemvPass<F>(w, rows, cols, x + j0 * ldx, ldx, nj,
                                                y + j0 * ldy, ldy, accumulate, stream));
  }
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchDequantizeToHalf(BlockFormat format, const uint8_t* w, int64_t rows, int cols,
                                   __half* out, cudaStream_t stream) {
  if (rows <= 0) return "";
  if (cols % BlockElements(format) != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return "LaunchDequantizeToHalf: cols must be a multiple of the block size, out aligned";
  }
  const int grid = GridFor(rows * (cols / 8));
  VQ_BLOCK_FORMAT_SWITCH(format,
                         (DequantizeToHalfKernel<F><<<grid, kThreads, 0, stream>>>(w, rows, cols, out)));
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchGatherRows(BlockFormat format, const uint8_t* w, const int32_t* ids, int n,
                             int cols, float* out, cudaStream_t stream) {
  if (n <= 0) return "";
  if (cols % BlockElements(format) != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return "LaunchGatherRows: cols must be a multiple of the block size, out aligned";
  }
  const int grid = GridFor(int64_t{n} * (cols / 8));
  VQ_BLOCK_FORMAT_SWITCH(format,
                         (GatherRowsKernel<F><<<grid, kThreads, 0, stream>>>(w, ids, n, cols, out)));
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchFillRandomBlocks(BlockFormat format, uint8_t* w, int64_t rows, int cols,
                                   float amplitude, uint64_t seed, cudaStream_t stream) {
  const int per_row = cols / BlockElements(format);
  const int64_t blocks = rows * per_row;
  if (blocks <= 0) return "";
  const int bytes = static_cast<int>(BlockRowBytes(format, cols) / per_row);
  FillRandomBlocksKernel<<<GridFor(blocks), kThreads, 0, stream>>>(format, w, blocks, bytes,
                                                                   amplitude, seed);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
