// the block-weight kernels (block_weights.h): the fused multiply in integers for batches of 1-2
// (x quantized to int8 in 16-element runs first; then a block of 128 threads on 8 weight rows,
// 32-element vectors of quants against those runs, dp4a) and on tensor cores for 3-16 (x
// first permuted into the order the mma fragments read it; then a block of 8 warps on 16 or 32
// rows, the same vectors dequantized in fp16 pairs straight into mma fragments); one thread
// per 8-element chunk for the dequantization and gather.
#include "kernels/cuda/weights/block_weights.h"

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dependent_launch.cuh"
#include "kernels/cuda/common/mma_ops.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65536;

int GridFor(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? (b > 0 ? b : 1) : kMaxBlocks);
}

// the integer gemv (n <= kBlockGemvIntColumns): a block of kGemvThreads threads on kGemvRows
// weight rows; a thread loads one 32-element vector (block_formats.h) of each row before
// using any, so it keeps kGemvRows loads of 16-32 bytes in flight whatever the row length (a
// 4096-column row is 128 vectors: one a thread). x comes quantized to int8 in 16-element runs
// (QuantizeRunsKernel, once a pass) and each run's dot product is 4 dp4a instructions: about
// one instruction a weight, where dequantizing to fp32 took six and left the batch-1 gemv
// bound by instruction issue, not memory.
constexpr int kGemvThreads = 128;
constexpr int kGemvRows = 8;

// x's runs quantized: q (n, cols) int8 at the front of the scratch, then ds (n, cols / 16)
// {d, sum of the run's q}: x_i ~ d q_i with d = max |x_i| / 127 and q_i = x_i (127 / max |x_i|)
// rounded to nearest even (all 0 for a zero run).
struct Int8Runs {
  int8_t* q;
  float2* ds;
};

Int8Runs RunsIn(void* scratch, int cols) {
  auto* q = static_cast<int8_t*>(scratch);
  return {q, reinterpret_cast<float2*>(q + int64_t{kBlockGemvIntColumns} * cols)};
}

// grid over the n * cols / 16 runs, one a thread: x (n, ldx) fp16 -> runs (n, cols).
__global__ void QuantizeRunsKernel(const __half* __restrict__ x, int64_t ldx, int n, int cols,
                                   Int8Runs runs) {
  GridDependencyWait();
  const int per_col = cols / 16;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * per_col) return;
  const int j = static_cast<int>(i / per_col), k = static_cast<int>(i % per_col);
  const __half* p = x + j * ldx + 16 * k;
  const uint4 raw[2] = {__ldg(reinterpret_cast<const uint4*>(p)),
                        __ldg(reinterpret_cast<const uint4*>(p + 8))};
  const __half2* h = reinterpret_cast<const __half2*>(raw);
  float f[16];
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    const float2 v = __half22float2(h[t]);
    f[2 * t] = v.x;
    f[2 * t + 1] = v.y;
  }
  float amax = 0.0f;
#pragma unroll
  for (int t = 0; t < 16; ++t) amax = fmaxf(amax, fabsf(f[t]));
  const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  uint32_t word[4];
  int qsum = 0;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    int b[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) b[t] = __float2int_rn(__fmul_rn(f[4 * w + t], inv));
    word[w] = __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040),
                          0x5410);
    qsum = __dp4a(static_cast<int>(word[w]), 0x01010101, qsum);
  }
  *reinterpret_cast<uint4*>(runs.q + j * int64_t{cols} + 16 * k) =
      make_uint4(word[0], word[1], word[2], word[3]);
  runs.ds[i] = make_float2(__fdiv_rn(amax, 127.0f), static_cast<float>(qsum));
}

// y (n, ldy) (+)= x · w (rows, cols)ᵀ for n <= NB columns of x's runs: y = sum over runs of
// d (a sum_i q_i qx_i + b sum_i qx_i) = sum_k w_k x^_k exactly up to fp32 rounding (x^ = d q).
// grid: one block per kGemvRows rows [r0, r0 + kGemvRows); thread t takes the rows' vectors t,
// t + kGemvThreads, ... (a long row, the 8b's ffn_down of 448 vectors, spreads over the whole
// block): loads vector v of each row (LoadVec), then per run takes the rows' integer runs
// (RunInts) against each column's run of x. the threads' partial sums meet in warp shuffles
// and shared memory.
// one column fits 128 registers a thread without spills: 4 blocks an sm instead of 3.
template <BlockFormat F, int NB>
__global__ void __launch_bounds__(kGemvThreads, NB == 1 ? 4 : 1)
    BlockGemvKernel(const uint8_t* __restrict__ w, int rows, int cols, Int8Runs runs, int n,
                    float* __restrict__ y, int64_t ldy, bool accumulate) {
  constexpr int kRows = kGemvRows, kWarps = kGemvThreads / 32;
  const int r0 = blockIdx.x * kRows;
  const int64_t row_bytes = BlockRowBytes(F, cols);
  const int vecs = cols / 32;
  const uint8_t* row[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) row[r] = w + (r0 + r < rows ? r0 + r : rows - 1) * row_bytes;
  float acc[kRows][NB];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[r][j] = 0.0f;
  }
  for (int v = threadIdx.x; v < vecs; v += kGemvThreads) {
    RawVec q[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) q[r] = LoadVec<F>(row[r], v);
    // the weights are ours alone: the first ones load while the kernel ahead, x's quantizer,
    // finishes (dependent_launch.cuh).
    GridDependencyWait();
#pragma unroll
    for (int run = 0; run < 2; ++run) {
      IntRun ir[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) ir[r] = RunInts<F>(q[r], v, run);
      const int start = VecPartStart<F>(v, 2 * run);
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        if (j < n) {
          const uint4 xq = __ldg(reinterpret_cast<const uint4*>(runs.q + j * int64_t{cols} + start));
          const float2 ds = __ldg(runs.ds + j * int64_t{cols / 16} + start / 16);
          const int xw[4] = {static_cast<int>(xq.x), static_cast<int>(xq.y),
                             static_cast<int>(xq.z), static_cast<int>(xq.w)};
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            int dot = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) dot = __dp4a(static_cast<int>(ir[r].q[i]), xw[i], dot);
            acc[r][j] = fmaf(ds.x, fmaf(ir[r].a, static_cast<float>(dot), ir[r].b * ds.y),
                             acc[r][j]);
          }
        }
      }
    }
  }
  GridDependencyWait();  // a thread without vectors still writes y below
  __shared__ float sums[kWarps][kRows][NB];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      float a = acc[r][j];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
      if (lane == 0) sums[warp][r][j] = a;
    }
  }
  __syncthreads();
  const int t = threadIdx.x, r = t / NB, j = t % NB;
  if (t < kRows * NB && r0 + r < rows && j < n) {
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) a += sums[k][r][j];
    float* out = y + j * ldy + r0 + r;
    *out = accumulate ? *out + a : a;
  }
}

template <BlockFormat F, int NB>
void GemvLaunch(const uint8_t* w, int rows, int cols, Int8Runs runs, int n, float* y,
                int64_t ldy, bool accumulate, cudaStream_t stream) {
  const int grid = (rows + kGemvRows - 1) / kGemvRows;
  LaunchAfterPrevious(BlockGemvKernel<F, NB>, dim3(grid), dim3(kGemvThreads), 0, stream, w,
                      rows, cols, runs, n, y, ldy, accumulate);
}

// x (n, ldx) quantized into the scratch's runs, then the gemv of the columns' count.
template <BlockFormat F>
void GemvPass(const uint8_t* w, int rows, int cols, const __half* x, int64_t ldx, int n,
              float* y, int64_t ldy, bool accumulate, void* scratch, cudaStream_t stream) {
  const Int8Runs runs = RunsIn(scratch, cols);
  const int64_t count = static_cast<int64_t>(n) * (cols / 16);
  LaunchAfterPrevious(QuantizeRunsKernel, dim3(static_cast<unsigned>((count + 127) / 128)),
                      dim3(128), 0, stream, x, ldx, n, cols, runs);
  static_assert(kBlockGemvIntColumns == 2, "one gemv instance a column count");
  if (n <= 1) {
    GemvLaunch<F, 1>(w, rows, cols, runs, n, y, ldy, accumulate, stream);
  } else {
    GemvLaunch<F, 2>(w, rows, cols, runs, n, y, ldy, accumulate, stream);
  }
}

// the tensor-core pass (kBlockGemvIntColumns < n <= 16): a block of kMmaWarps warps on
// T x 16 weight rows (T = 2, or 1 below kMmaOneTileRows rows), the warps splitting the rows'
// columns. a row's sum is the same whatever T: T only says which rows a block takes.
constexpr int kMmaWarps = 8;
// below this many rows (the 8b's q / k / v / o / down: 1024-5120 rows, 32-160 blocks of 32 rows
// on 132 sms) blocks of 16 rows: twice the blocks, more loads in flight an sm.
constexpr int kMmaOneTileRows = 8192;

// word i of run r's quants (RunWord) as unsigned bytes: q8_0's signed ones offset by 128.
template <BlockFormat F>
__device__ __forceinline__ uint32_t QuantWord(const RawVec& q, int v, int r, int i) {
  const uint32_t w = RunWord<F>(q, v, r, i);
  return F == BlockFormat::kQ8_0 ? w ^ 0x80808080u : w;
}

__device__ __forceinline__ __half2 AsHalf2(uint32_t bits) {
  return *reinterpret_cast<const __half2*>(&bits);
}

// the fp16 pairs (a, a), (b, b) of a vector's two runs: element = a u + b for QuantWord's bytes
// u. each is RunScale's fp32 value rounded to fp16, worked out in fp16 (products of an fp16
// and a small integer, rounded once: the same bits).
struct HalfRunFactors {
  __half2 a[2], b[2];
};

// q4_k / q5_k: runs 0, 1 of vector v are sub-blocks 2u, 2u + 1 (u = (v & 7) / 2), the same two
// as those of vector v ^ 1, which lane ^ 1 holds (v = 4 G + lane % 4): a lane works out the
// sub-block 2u + (v & 1) and takes the other from its neighbour. `j` = 2u + (v & 1) is the
// same in every group a warp takes (v & 7 = 4 (warp & 1) + lane % 4); j < 4 for even warps.
__device__ __forceinline__ uint32_t ScaleMinK4Half2(int j, uint32_t s0, uint32_t s1,
                                                    uint32_t s2) {
  // bytes j & 3 of s0 (a), s1 (b), s2 (c) placed at bits 0 and 16; the 6-bit scale (low) and
  // min (high) as fp16 integers 1024 + value.
  const uint32_t sel = (j & 3) | ((4 + (j & 3)) << 8);
  const uint32_t ab = __byte_perm(s0, s1, sel);
  uint32_t ints;
  if (j < 4) {
    ints = (ab & 0x003F003Fu) | 0x64006400u;  // a & 63, b & 63
  } else {
    const uint32_t cc = __byte_perm(s2, 0, (j & 3) | ((j & 3) << 8));  // c at bits 0, 16
    // (c & 15) | (a >> 6) << 4, (c >> 4) | (b >> 6) << 4
    ints = (cc & 0x0000000Fu) | ((cc >> 4) & 0x000F0000u) |
           ((ab >> 2) & 0x00300030u) | 0x64006400u;
  }
  return ints;
}

template <BlockFormat F>
__device__ __forceinline__ HalfRunFactors VecHalfFactors(const RawVec& q, int v, int j) {
  HalfRunFactors f;
  const __half2 d2 = AsHalf2(__byte_perm(q.head[0], 0, 0x1010));  // (d, d)
  if constexpr (F == BlockFormat::kQ4_K || F == BlockFormat::kQ5_K) {
    const __half2 ints = AsHalf2(ScaleMinK4Half2(j, q.head[1], q.head[2], q.head[3]));
    // (d sc, dmin mn): q.head[0] is (d, dmin)
    const __half2 own = __hmul2(AsHalf2(q.head[0]), __hsub2(ints, __float2half2_rn(1024.0f)));
    const uint32_t own_bits = *reinterpret_cast<const uint32_t*>(&own);
    const uint32_t other_bits = __shfl_xor_sync(0xffffffffu, own_bits, 1);
    const bool odd = (v & 1) != 0;
    const uint32_t r0 = odd ? other_bits : own_bits, r1 = odd ? own_bits : other_bits;
    f.a[0] = AsHalf2(__byte_perm(r0, 0, 0x1010));
    f.a[1] = AsHalf2(__byte_perm(r1, 0, 0x1010));
    f.b[0] = AsHalf2(__byte_perm(r0, 0, 0x3232) ^ 0x80008000u);
    f.b[1] = AsHalf2(__byte_perm(r1, 0, 0x3232) ^ 0x80008000u);
  } else if constexpr (F == BlockFormat::kQ6_K) {
    // the run scales (int8, bytes 2, 3 of head[0]) as fp16: 1024 + (s ^ 128) - 1152
    const uint32_t biased = (__byte_perm(q.head[0], 0x64646464u, 0x7372) ^ 0x00800080u);
    const __half2 sc = __hsub2(AsHalf2(biased), __float2half2_rn(1152.0f));
    const __half2 a = __hmul2(d2, sc);
    const __half2 b = __hmul2(d2, __hmul2(sc, __float2half2_rn(-32.0f)));  // exact scaling
    f.a[0] = __low2half2(a);
    f.a[1] = __high2half2(a);
    f.b[0] = __low2half2(b);
    f.b[1] = __high2half2(b);
  } else {
    __half2 b;
    if constexpr (F == BlockFormat::kQ4_1) {
      b = AsHalf2(__byte_perm(q.head[0], 0, 0x3232));  // (m, m)
    } else {
      b = __hmul2(d2, __float2half2_rn(F == BlockFormat::kQ8_0 ? -128.0f : -8.0f));
    }
    f.a[0] = f.a[1] = d2;
    f.b[0] = f.b[1] = b;
  }
  return f;
}

// two of a word's bytes u0, u1 (sel 0x4140: bytes 0, 1; 0x4342: bytes 2, 3) -> fp16 pair
// (a u0 + b, a u1 + b): each byte placed in the mantissa of 1024 (exactly 1024 + u), 1024
// subtracted (exact), then one fused multiply-add.
__device__ __forceinline__ uint32_t QuantPairToHalf2(uint32_t word, uint32_t sel, __half2 a,
                                                     __half2 b) {
  const uint32_t biased = __byte_perm(word, 0x64u, sel);
  const __half2 u = __hsub2(AsHalf2(biased), __float2half2_rn(1024.0f));
  const __half2 w = __hfma2(u, a, b);
  return *reinterpret_cast<const uint32_t*>(&w);
}

// the vectors lane (g, t) multiplies in a group: vector 4 G + t of rows 16 m + g (h = 0) and
// 16 m + g + 8 (h = 1) of each tile m. rows past the matrix read its last row.
template <BlockFormat F, int kMmaTiles>
struct GroupVecs {
  RawVec r[kMmaTiles][2];
};

template <BlockFormat F, int kMmaTiles>
__device__ __forceinline__ void LoadGroup(const uint8_t* const (&row)[kMmaTiles][2], int v,
                                          int vecs, GroupVecs<F, kMmaTiles>* out) {
  // 32-element blocks: the last group may pass the row's end; those lanes load the last
  // vector, whose x pieces are zeros there (PermuteXKernel): they add nothing
  if constexpr (BlockTraits<F>::kBlock == 32) v = v < vecs ? v : vecs - 1;
#pragma unroll
  for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) out->r[m][h] = LoadVec<F>(row[m][h], v);
  }
}

// x laid out for the tensor-core pass (PermuteXKernel): piece (G, p, c, t) = the 8 elements of
// part p of vector 4G + t of x's column c (zeros past the row or past n), at 8 (((4G + p) 16 +
// c) 4 + t): a warp's B fragments of one part and 8 columns are 512 contiguous bytes.
constexpr int kPermutedColumns = 16;
// halves of one part (the 4 lanes' 8 elements of each column), of one n-tile's 8 columns within
// it, and of one group (4 parts); pieces (16-byte writes) of one group.
constexpr int kPermutedPartHalves = kPermutedColumns * 4 * 8;
constexpr int kPermutedTileHalves = kPermutedPartHalves / 2;
constexpr int kPermutedGroupHalves = 4 * kPermutedPartHalves;
constexpr int kPermutedGroupPieces = kPermutedGroupHalves / 8;

// grid over the groups' pieces, one a thread: x (n, ldx) -> xp (groups * kPermutedGroupHalves).
template <BlockFormat F>
__global__ void PermuteXKernel(const __half* __restrict__ x, int64_t ldx, int n, int cols,
                               __half* __restrict__ xp) {
  GridDependencyWait();
  const int vecs = cols / 32, groups = (vecs + 3) / 4;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= groups * kPermutedGroupPieces) return;
  const int t = i & 3, c = (i >> 2) & (kPermutedColumns - 1), p = (i >> 6) & 3, G = i >> 8;
  const int v = 4 * G + t;
  uint4 piece = make_uint4(0, 0, 0, 0);
  if (c < n && v < vecs) {
    piece = __ldg(reinterpret_cast<const uint4*>(x + c * ldx + VecPartStart<F>(v, p)));
  }
  *reinterpret_cast<uint4*>(xp + int64_t{i} * 8) = piece;
}

// acc (+)= the group's products: per part p of the vectors (8 elements), x's columns' same 8
// elements as B fragments (xl: this lane's pieces of group G's first part) and the dequantized
// weights as A, two k-steps.
template <BlockFormat F, int NT, int kMmaTiles>
__device__ __forceinline__ void MulGroup(const GroupVecs<F, kMmaTiles>& q, int v, int j,
                                         const __half* xl, float (&acc)[kMmaTiles][NT][4]) {
  HalfRunFactors f[kMmaTiles][2];
#pragma unroll
  for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) f[m][h] = VecHalfFactors<F>(q.r[m][h], v, j);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int pp = 0; pp < 2; ++pp) {
      uint32_t b[NT][4];  // x's 8 elements of part 2r + pp, columns g + 8 nt, as fp16 pairs
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint4 raw =
            __ldg(reinterpret_cast<const uint4*>(xl + (2 * r + pp) * kPermutedPartHalves +
                                                 nt * kPermutedTileHalves));
        b[nt][0] = raw.x, b[nt][1] = raw.y, b[nt][2] = raw.z, b[nt][3] = raw.w;
      }
#pragma unroll
      for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
        for (int s = 0; s < 2; ++s) {  // k-step 2 (2r + pp) + s: the part's elements 4s .. 4s + 3
          const uint32_t lo = QuantWord<F>(q.r[m][0], v, r, 2 * pp + s);
          const uint32_t hi = QuantWord<F>(q.r[m][1], v, r, 2 * pp + s);
          const uint32_t a0 = QuantPairToHalf2(lo, 0x4140, f[m][0].a[r], f[m][0].b[r]);
          const uint32_t a1 = QuantPairToHalf2(hi, 0x4140, f[m][1].a[r], f[m][1].b[r]);
          const uint32_t a2 = QuantPairToHalf2(lo, 0x4342, f[m][0].a[r], f[m][0].b[r]);
          const uint32_t a3 = QuantPairToHalf2(hi, 0x4342, f[m][1].a[r], f[m][1].b[r]);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            Mma16816(acc[m][nt], a0, a1, a2, a3, b[nt][2 * s], b[nt][2 * s + 1]);
          }
        }
      }
    }
  }
}

// y (n, ldy) (+)= x (n, ldx) · w (rows, cols)ᵀ for n <= 8 NT columns on tensor cores, the
// weights in fp16 (each run's factors a, b and a u + b rounded), fp32 accumulation. grid: one
// block per 16 kMmaTiles rows [r0, r0 + 16 kMmaTiles); warp w takes the vector groups G = w,
// w + kMmaWarps, ... (group G: vectors 4G .. 4G + 3 of each row, 128 elements). in m16n8k16
// terms lane (g, t) = (lane / 4, lane % 4) loads vector 4G + t of rows g and g + 8 of each
// 16-row tile (the next group's while it multiplies this one: two register sets in turn),
// dequantizes it in fp16 pairs (QuantPairToHalf2: about 1.5 instructions a weight) into its
// A-fragment slots of 8 k-steps and takes the same elements of x's columns g (, g + 8) as its
// B fragments, from x permuted (xp, PermuteXKernel) so that a warp's loads of them are
// contiguous: the mma's k runs over the 4 vectors' elements in an order that A and B share,
// so it sums the dot product. the warps' partial tiles meet in shared memory. 2 blocks an sm
// (128 registers, a few spilled): on the H200 the 8B's batch-4 step took 3.79 ms against 4.10
// with 157-171 registers and one block (2026-12-04, same call).
template <BlockFormat F, int NT, int kMmaTiles>
__global__ void __launch_bounds__(kMmaWarps * 32, 2)
    BlockMmaKernel(const uint8_t* __restrict__ w, int rows, int cols,
                   const __half* __restrict__ xp, int n, float* __restrict__ y, int64_t ldy,
                   bool accumulate) {
  constexpr int kRows = 16 * kMmaTiles;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int r0 = blockIdx.x * kRows;
  const int64_t row_bytes = BlockRowBytes(F, cols);
  const int vecs = cols / 32, groups = (vecs + 3) / 4;
  const int sub = 4 * (warp & 1) + t;  // q4_k / q5_k: the sub-block whose factors a lane works out
  const uint8_t* row[kMmaTiles][2];  // rows 16m + g, 16m + g + 8 of the block
#pragma unroll
  for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 16 * m + g + 8 * h;
      row[m][h] = w + (r < rows ? r : rows - 1) * row_bytes;
    }
  }
  const __half* xl = xp + lane * 8;  // this lane's pieces (PermuteXKernel)
  float acc[kMmaTiles][NT][4];
#pragma unroll
  for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0.0f;
    }
  }
  GroupVecs<F, kMmaTiles> va, vb;
  int G = warp;
  if (G < groups) LoadGroup<F, kMmaTiles>(row, 4 * G + t, vecs, &va);
  GridDependencyWait();  // the first weights loaded while x's permutation finished
  while (G < groups) {
    if (G + kMmaWarps < groups) LoadGroup<F, kMmaTiles>(row, 4 * (G + kMmaWarps) + t, vecs, &vb);
    MulGroup<F, NT, kMmaTiles>(va, 4 * G + t, sub, xl + G * kPermutedGroupHalves, acc);
    G += kMmaWarps;
    if (G >= groups) break;
    if (G + kMmaWarps < groups) LoadGroup<F, kMmaTiles>(row, 4 * (G + kMmaWarps) + t, vecs, &va);
    MulGroup<F, NT, kMmaTiles>(vb, 4 * G + t, sub, xl + G * kPermutedGroupHalves, acc);
    G += kMmaWarps;
  }
  // acc[m][nt]: rows 16m + g (0, 1) and 16m + g + 8 (2, 3), columns 8nt + 2t (0, 2), + 1 (1, 3).
  __shared__ float sums[kMmaWarps][kRows][8 * NT];
#pragma unroll
  for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sums[warp][16 * m + g + 8 * (i >> 1)][8 * nt + 2 * t + (i & 1)] = acc[m][nt][i];
      }
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < kRows * 8 * NT; o += kMmaWarps * 32) {
    const int r = o / (8 * NT), j = o % (8 * NT);
    if (r0 + r >= rows || j >= n) continue;
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < kMmaWarps; ++k) a += sums[k][r][j];
    float* out = y + j * ldy + r0 + r;
    *out = accumulate ? *out + a : a;
  }
}

// x (n, ldx) permuted into the scratch (PermuteXKernel), then the tensor-core pass.
template <BlockFormat F>
void MmaPass(const uint8_t* w, int rows, int cols, const __half* x, int64_t ldx, int n,
             float* y, int64_t ldy, bool accumulate, void* scratch, cudaStream_t stream) {
  __half* xp = static_cast<__half*>(scratch);
  const int groups = (cols / 32 + 3) / 4;
  LaunchAfterPrevious(PermuteXKernel<F>, dim3((groups * kPermutedGroupPieces + 127) / 128), dim3(128), 0, stream,
                      x, ldx, n, cols, xp);
  const int tiles = rows < kMmaOneTileRows ? 1 : 2;
  const dim3 grid((rows + 16 * tiles - 1) / (16 * tiles)), block(kMmaWarps * 32);
  const auto launch = [&](auto kernel) {
    LaunchAfterPrevious(kernel, grid, block, 0, stream, w, rows, cols,
                        static_cast<const __half*>(xp), n, y, ldy, accumulate);
  };
  if (tiles == 1) {
    n <= 8 ? launch(BlockMmaKernel<F, 1, 1>) : launch(BlockMmaKernel<F, 2, 1>);
  } else {
    n <= 8 ? launch(BlockMmaKernel<F, 1, 2>) : launch(BlockMmaKernel<F, 2, 2>);
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

int64_t BlockGemvScratchBytes(int cols) {
  const int64_t runs = int64_t{kBlockGemvIntColumns} * cols +
                       int64_t{kBlockGemvIntColumns} * (cols / 16) * 8;
  const int64_t permuted = int64_t{(cols / 32 + 3) / 4} * kPermutedGroupHalves * 2;
  return runs > permuted ? runs : permuted;
}

std::string LaunchBlockGemv(BlockFormat format, const uint8_t* w, int rows, int cols,
                            const __half* x, int64_t ldx, int n, float* y, int64_t ldy,
                            bool accumulate, void* scratch, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return "";
  if (cols % BlockElements(format) != 0 || ldx % 8 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(scratch) % 16 != 0 || scratch == nullptr) {
    return "LaunchBlockGemv: cols must be a multiple of the block size, w, x and the scratch "
           "16-byte aligned";
  }
  for (int j0 = 0; j0 < n; j0 += kBlockGemvMaxColumns) {
    const int nj = n - j0 < kBlockGemvMaxColumns ? n - j0 : kBlockGemvMaxColumns;
    if (nj <= kBlockGemvIntColumns) {
      VQ_BLOCK_FORMAT_SWITCH(format, GemvPass<F>(w, rows, cols, x + j0 * ldx, ldx, nj,
                                                  y + j0 * ldy, ldy, accumulate, scratch,
                                                  stream));
    } else {
      VQ_BLOCK_FORMAT_SWITCH(format, MmaPass<F>(w, rows, cols, x + j0 * ldx, ldx, nj,
                                                 y + j0 * ldy, ldy, accumulate, scratch,
                                                 stream));
    }
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
