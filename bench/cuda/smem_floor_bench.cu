// the speed of light of table-gather decode attention on this gpu, for the two coded formats
// whose speed targets are open (issue 5). each kernel does only the traffic that the format
// forces on every token, in our kernels' frame (one 512-thread block per (split, kv head,
// sequence), one wave; every warp streams its own 32-token pages through cp.async stages in
// shared memory), and nothing else: no softmax, no products, no rotation. the gathered words
// are xor-folded into one word per thread so that no load is dead. every gather pattern is
// free of bank conflicts, so a kernel over these formats that computes attention can only be
// slower than its floor here.
//   floor-stream-vecinfer  vecinfer k2v2 pages (1 KB k + 1 KB v codes per page and kv head),
//                          every code word read once from its stage
//   floor-vecinfer         + per token 32 key-lut and 32 value-book 8-byte gathers (the lut
//                          and the fp16 books, 64 KB each, as in the v8 kernel)
//   floor-stream-commvq1   commvq-1 pages at head_dim 128 (1104 B per page and kv head),
//                          the 11 key rounds' codes unpacked to row numbers once per token
//   floor-commvq1          + per token 22 fp16 book rows of 256 B (rounds' A and B rows, the
//                          books of 11 rounds, 176 KB), 16 lanes per token; values not read
// prints csv rows as attention_bench (kernel,batch,context,time_us,bytes,gbps,pct_of_copy),
// for sdpa_bench.py --ours. usage: smem_floor_bench [out.csv] ; env BENCH_SIZES=16x32768,...
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cuda/gpu_timing.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"

namespace {

using vqserve::cuda::CpAsync16;
using vqserve::cuda::CpAsyncCommit;
using vqserve::cuda::CpAsyncWait;

constexpr int kThreads = 512, kWarps = 16, kKvHeads = 8, kPage = 32;
constexpr int kSmemBytes = 232448;
constexpr int kVecInferHeadBytes = 2048;          // k codes [32][32] + v codes [32][32]
constexpr int kCvqRounds = 11;                    // commvq-1 key rounds at head_dim 128
constexpr int kCvqScale = 64, kCvqCodes = 528, kCvqValues = 512;  // per page and kv head
constexpr int kCvqHeadBytes = kCvqScale + kCvqCodes + kCvqValues; // 1104
constexpr int kCvqBooks = kCvqRounds * 64 * 256;  // fp16 rows of 64 pairs: 180224 bytes
constexpr int kCvqDec = 24;                       // row table bytes per token: 22 + pad

__device__ inline uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ inline uint32_t Lds32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a));
  return v;
}
__device__ inline uint2 Lds64(uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
__device__ inline uint4 Lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}

// page range of this block: pages [p0, p1) of sequence blockIdx.z, kv head blockIdx.y.
struct BlockPages {
  int p0, p1;
};
__device__ inline BlockPages MakeBlockPages(int pages_per_seq) {
  const int per = (pages_per_seq + gridDim.x - 1) / gridDim.x;
  const int p0 = min(pages_per_seq, static_cast<int>(blockIdx.x) * per);
  return {p0, min(pages_per_seq, p0 + per)};
}

// vecinfer k2v2. pages: [seq][page] of kKvHeads * 2 KB (k codes of every head, then v codes).
// smem: lut [256][32] x 8 B, Cv [256][32] x 8 B, then 16 warps x 3 stages x 2 KB.
// lane l owns token l of a page; its register j holds code word (j + rot) & 7 of its row (rot =
// l / 4 & 7), so step (j, b) reads sub-vector m = 4 ((j + rot) & 7) + ((b + l) & 3): a half warp
// sees 16 distinct m mod 16, the entries' bank pairs (entry (code, m) at code * 256 + m * 8).
template <bool kGather>
__global__ void __launch_bounds__(kThreads, 1) VecInferFloor(const uint8_t* pages, int pages_per_seq, uint32_t* sink) {
  extern __shared__ uint4 smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem4);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, kvh = blockIdx.y;
  for (int i = threadIdx.x; i < 2 * 256 * 32 * 2; i += kThreads) reinterpret_cast<uint32_t*>(smem)[i] = i * 2654435761u;
  __syncthreads();
  const uint32_t lut = SmemAddr(smem), cv = lut + 65536;
  uint8_t* wst = smem + 131072 + warp * 3 * kVecInferHeadBytes;
  const BlockPages bp = MakeBlockPages(pages_per_seq);
  const int npages = bp.p1 - bp.p0 > warp ? (bp.p1 - bp.p0 - warp + kWarps - 1) / kWarps : 0;
  const uint8_t* base = pages + (static_cast<size_t>(blockIdx.z) * pages_per_seq + bp.p0 + warp) * (kKvHeads * kVecInferHeadBytes);
  auto issue = [&](int stage, int i) {
    if (i < npages) {
      const uint8_t* src = base + static_cast<size_t>(i) * kWarps * kKvHeads * kVecInferHeadBytes + kvh * 1024 + lane * 16;
      uint8_t* dst = wst + stage * kVecInferHeadBytes + lane * 16;
      CpAsync16(dst, src);
      CpAsync16(dst + 512, src + 512);
      CpAsync16(dst + 1024, src + kKvHeads * 1024);
      CpAsync16(dst + 1536, src + kKvHeads * 1024 + 512);
    }
    CpAsyncCommit();
  };
  issue(0, 0);
  issue(1, 1);
  issue(2, 2);
  const int rot = (lane >> 2) & 7;
  uint32_t sel[4], lo[4];
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const int by = (b + lane) & 3;
    sel[b] = 0x7604u | (by << 4);  // code byte `by` of the word to bits 8..15, the constant's byte 0 below it
    lo[b] = by * 8;
  }
  uint32_t acc = 0;
  int st = 0;
  for (int i = 0; i < npages; ++i) {
    CpAsyncWait<2>();
    __syncwarp();
    const uint32_t row = SmemAddr(wst + st * kVecInferHeadBytes) + lane * 32;
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // k codes, then v codes
      const uint32_t table = half == 0 ? lut : cv;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int w = (j + rot) & 7;
        const uint32_t word = Lds32(row + half * 1024 + 4 * w);
        if constexpr (kGather) {
          const uint32_t hi = table + 32 * w;
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            const uint2 e = Lds64(__byte_perm(word, lo[b], sel[b]) + hi);
            acc ^= e.x ^ e.y;
          }
        } else {
          acc ^= word;
        }
      }
    }
    __syncwarp();
    issue(st, i + 3);
    st = st == 2 ? 0 : st + 1;
  }
  CpAsyncWait<0>();
  sink[(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x * kThreads + blockIdx.x * kThreads + threadIdx.x] = acc;
}

// commvq-1, head_dim 128. pages: [seq][page] of kKvHeads * 1104 B (scales of every head, then
// key codes, then value codes, as docs/kv_formats.md). smem: books [11][64 rows][64 pairs] fp16
// x 2, then per warp 2 stages of 1104 B and a row table [32 tokens][kCvqDec] (A_r, B_r bytes).
// per page: lane t unpacks token t's 11 12-bit codes; then 16 lanes per token (2 tokens per
// step) read 16 bytes of each of its 22 rows (r, A_r) and (r, B_r).
template <bool kGather>
__global__ void __launch_bounds__(kThreads, 1) CommVqFloor(const uint8_t* pages, int pages_per_seq, uint32_t* sink) {
  extern __shared__ uint4 smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem4);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, kvh = blockIdx.y;
  for (int i = threadIdx.x; i < kCvqBooks / 4; i += kThreads) reinterpret_cast<uint32_t*>(smem)[i] = i * 2654435761u;
  __syncthreads();
  uint8_t* wst = smem + kCvqBooks + warp * (2 * kCvqHeadBytes + 32 * kCvqDec);
  uint8_t* dec = wst + 2 * kCvqHeadBytes;
  const BlockPages bp = MakeBlockPages(pages_per_seq);
  const int npages = bp.p1 - bp.p0 > warp ? (bp.p1 - bp.p0 - warp + kWarps - 1) / kWarps : 0;
  const uint8_t* base = pages + (static_cast<size_t>(blockIdx.z) * pages_per_seq + bp.p0 + warp) * (kKvHeads * kCvqHeadBytes);
  auto issue = [&](int stage, int i) {
    if (i < npages) {
      const uint8_t* src = base + static_cast<size_t>(i) * kWarps * kKvHeads * kCvqHeadBytes;
      uint8_t* dst = wst + stage * kCvqHeadBytes;
      for (int c = lane; c < kCvqHeadBytes / 16; c += 32) {  // 4 scale, 33 key, 32 value chunks
        const int off = c < 4 ? kvh * kCvqScale + 16 * c
                        : c < 37 ? kKvHeads * kCvqScale + kvh * kCvqCodes + 16 * (c - 4)
                                 : kKvHeads * (kCvqScale + kCvqCodes) + kvh * kCvqValues + 16 * (c - 37);
        CpAsync16(dst + 16 * c, src + off);
      }
    }
    CpAsyncCommit();
  };
  issue(0, 0);
  issue(1, 1);
  const uint32_t lane_books = SmemAddr(smem) + (lane & 15) * 16;  // + r * 16384 + row * 256
  uint32_t acc = 0;
  int st = 0;
  for (int i = 0; i < npages; ++i) {
    CpAsyncWait<1>();
    __syncwarp();
    const uint8_t* kc = wst + st * kCvqHeadBytes + kCvqScale;  // [11 rounds][16 token pairs][3]
    {  // lane = token: its 11 codes -> bytes A_0, B_0, A_1, ... of its row table entry
      uint32_t nw[6] = {0, 0, 0, 0, 0, 0};
#pragma unroll
      for (int r = 0; r < kCvqRounds; ++r) {
        const uint8_t* g = kc + (r * 16 + (lane >> 1)) * 3;
        const uint32_t w = g[0] | g[1] << 8 | g[2] << 16;
        const uint32_t code = lane & 1 ? w >> 12 : w & 0xfff;
        nw[r >> 1] |= ((code & 63) | (code >> 6) << 8) << (16 * (r & 1));
      }
      uint2* mine = reinterpret_cast<uint2*>(dec + lane * kCvqDec);
      mine[0] = make_uint2(nw[0], nw[1]);
      mine[1] = make_uint2(nw[2], nw[3]);
      mine[2] = make_uint2(nw[4], nw[5]);
    }
    __syncwarp();
#pragma unroll 2
    for (int s = 0; s < 16; ++s) {  // tokens 2 s (lanes < 16) and 2 s + 1
      const uint32_t d = SmemAddr(dec + (2 * s + (lane >> 4)) * kCvqDec);
      const uint2 n0 = Lds64(d), n1 = Lds64(d + 8), n2 = Lds64(d + 16);
      const uint32_t nw[6] = {n0.x, n0.y, n1.x, n1.y, n2.x, n2.y};
      if constexpr (kGather) {
#pragma unroll
        for (int k = 0; k < 2 * kCvqRounds; ++k) {  // row k: round k / 2, A (k even) or B
          const uint32_t row256 = __byte_perm(nw[k >> 2], 0, 0x4404u | ((k & 3) << 4));  // byte << 8
          const uint4 e = Lds128(lane_books + row256 + (k >> 1) * 16384);
          acc ^= e.x ^ e.y ^ e.z ^ e.w;
        }
      } else {
#pragma unroll
        for (int k = 0; k < 6; ++k) acc ^= nw[k];
      }
    }
    __syncwarp();
    issue(st, i + 2);
    st ^= 1;
  }
  CpAsyncWait<0>();
  sink[(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x * kThreads + blockIdx.x * kThreads + threadIdx.x] = acc;
}

struct Variant {
  const char* name;
  void (*kernel)(const uint8_t*, int, uint32_t*);
  int head_bytes;  // page bytes per kv head
};

}  // namespace

int main(int argc, char** argv) {
  FILE* csv = argc > 1 ? std::fopen(argv[1], "a") : nullptr;
  int sms = 0;
  VQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double ceiling = vqserve::bench::CopyCeiling(size_t{2} << 30);  // as attention_bench
  std::printf("copy ceiling (read+write): %.1f GB/s, %d sms\n", ceiling / 1e9, sms);
  const Variant variants[] = {
      {"floor-stream-vecinfer", VecInferFloor<false>, kVecInferHeadBytes},
      {"floor-vecinfer", VecInferFloor<true>, kVecInferHeadBytes},
      {"floor-stream-commvq1", CommVqFloor<false>, kCvqHeadBytes},
      {"floor-commvq1", CommVqFloor<true>, kCvqHeadBytes},
  };
  static_assert(131072 + kWarps * 3 * kVecInferHeadBytes <= kSmemBytes, "vecinfer smem");
  static_assert(kCvqBooks + kWarps * (2 * kCvqHeadBytes + 32 * kCvqDec) <= kSmemBytes, "commvq smem");
  for (const Variant& v : variants) {
    VQ_CUDA_CHECK(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  }
  const char* sizes_env = std::getenv("BENCH_SIZES");
  std::stringstream sizes(sizes_env != nullptr ? sizes_env : "1x131072,16x32768");
  std::string item;
  std::printf("%-22s %5s %7s %10s %9s %6s\n", "kernel", "batch", "ctx", "us", "GB/s", "%copy");
  while (std::getline(sizes, item, ',')) {
    const int batch = std::atoi(item.c_str()), ctx = std::atoi(item.c_str() + item.find('x') + 1);
    const int pages_per_seq = ctx / kPage;
    const int splits = std::max(1, sms / (batch * kKvHeads));  // one wave, as the decode kernels
    uint32_t* sink;
    VQ_CUDA_CHECK(cudaMalloc(&sink, size_t{4} * splits * kKvHeads * batch * kThreads));
    for (const Variant& v : variants) {
      const size_t pool = static_cast<size_t>(batch) * pages_per_seq * kKvHeads * v.head_bytes;
      const int copies = static_cast<int>(std::min<size_t>(8, (size_t{256} << 20) / pool + 1));
      uint8_t* pages;
      VQ_CUDA_CHECK(cudaMalloc(&pages, pool * copies));
      VQ_CUDA_CHECK(cudaMemset(pages, 0x5a, pool * copies));
      const double us = 1e3 * vqserve::bench::MedianEventMs(5, 20, [&](int it) {
        v.kernel<<<dim3(splits, kKvHeads, batch), kThreads, kSmemBytes>>>(pages + (it % copies) * pool, pages_per_seq, sink);
        VQ_CUDA_CHECK(cudaGetLastError());
      });
      const double gbps = pool / (us * 1e-6) / 1e9;
      std::printf("%-22s %5d %7d %10.1f %9.1f %6.1f   (splits %d)\n", v.name, batch, ctx, us, gbps,
                  100.0 * gbps * 1e9 / ceiling, splits);
      if (csv) std::fprintf(csv, "%s,%d,%d,%.2f,%.0f,%.1f,%.1f\n", v.name, batch, ctx, us, static_cast<double>(pool), gbps,
                            100.0 * gbps * 1e9 / ceiling);
      VQ_CUDA_CHECK(cudaFree(pages));
    }
    VQ_CUDA_CHECK(cudaFree(sink));
  }
  if (csv) std::fclose(csv);
  return 0;
}
