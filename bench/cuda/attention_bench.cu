// times the cuda decode-attention kernels on the llama-3.1-8b attention shape (32 query heads,
// 8 kv heads, head_dim 128) for batch x context, with random pages filled on the gpu. also
// measures the device-to-device copy ceiling. prints csv rows:
//   kernel,batch,context,time_us,bytes,gbps,pct_of_copy
// usage: attention_bench [out.csv|-] [kernel batch context]   (the three filter one case)
// env BENCH_KERNELS=a,b,...: time only these kernels; env BENCH_SIZES=16x32768,1x131072,...:
// only these batch x context sizes; BENCH_BATCHES=1,16,...: only these batches;
// BENCH_CONTEXTS=256,512,...: these contexts (default 8192, 32768, 131072);
// BENCH_SPLITS=N: N split-kv splits instead of the launcher's choice; BENCH_SHAPE=smollm2: the
// SmolLM2-135M shape (9 query heads, 3 kv heads, head_dim 64) instead.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cuda/gpu_timing.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/common/vecinfer_half_books.h"

namespace {

using vqserve::cuda::DecodeAttentionParams;
using vqserve::cuda::KvPageFormat;

__device__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
// bytes: uniform random.
__global__ void FillBytes(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) * 4; i < n; i += size_t{gridDim.x} * blockDim.x * 4) {
    const uint32_t r = Hash(seed * 0x9e3779b97f4a7c15ull + i);
    for (int j = 0; j < 4 && i + j < n; ++j) p[i + j] = static_cast<uint8_t>(r >> (8 * j));
  }
}
// halves: uniform in [lo, hi).
__global__ void FillHalves(__half* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float u = (Hash(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = __float2half(lo + (hi - lo) * u);
  }
}
__global__ void FillFloats(float* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float u = (Hash(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
  }
}

struct Kernel {
  std::string name;
  KvPageFormat format;
  int kivi_bits, dk, dv, residual;
  int cvq_rounds = 0, cvq_value_rounds = 0;  // commvq: key / value rounds
  int k_code_bits = 8, v_code_bits = 8;  // vecinfer code widths (12: the generic kernel)
  int half_books = 0;  // fp16 book copies (vecinfer_half_books.h): 1 values, 2 keys + values
  bool pca = false;    // vecinfer -pca keys: per kv head books of 1-8-dim sub-vectors, lut built first
  int k_codes = 0;     // -pca key codes a token at head_dim 64, scaled by D / 64 (0: D / dk)
};

// commvq token scales (fp16 key norms, the first 64 * kv heads bytes of every page): 4 .. 24.
__global__ void FillCommVqScales(uint8_t* pages, size_t num_pages, size_t page_bytes, int n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < num_pages * n; i += size_t{gridDim.x} * blockDim.x) {
    const float u = (Hash(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (1.0f / 16777216.0f);
    reinterpret_cast<__half*>(pages + (i / n) * page_bytes)[i % n] = __float2half(4.0f + 20.0f * u);
  }
}

// the attention shape: Llama-3.1-8B's (32 query heads, 8 kv heads, head_dim 128), or with env
// BENCH_SHAPE=smollm2 SmolLM2-135M's (9, 3, 64; the default model).
struct AttentionShape {
  int heads, kv_heads, dim;
};
AttentionShape ShapeFromEnv() {
  const char* e = std::getenv("BENCH_SHAPE");
  if (e != nullptr && std::string(e) == "smollm2") return {9, 3, 64};
  return {32, 8, 128};
}
const AttentionShape kShape = ShapeFromEnv();
const int kHeads = kShape.heads, kKvHeads = kShape.kv_heads, kDim = kShape.dim;
constexpr int kPage = 32;
int KeyCodes(const Kernel& k) { return k.k_codes > 0 ? k.k_codes * kDim / 64 : kDim / k.dk; }

size_t LayerPageBytes(const Kernel& k) {
  const size_t H = kKvHeads, D = kDim, P = kPage;
  switch (k.format) {
    case KvPageFormat::kFp16:
      return 4 * H * P * D;
    case KvPageFormat::kKivi:
      return 4 * H * D + 4 * H * P * (D / 32) + 2 * H * D * P * k.kivi_bits / 8;
    case KvPageFormat::kVecInfer:
      return H * P * (KeyCodes(k) * k.k_code_bits / 8 + (D / k.dv) * k.v_code_bits / 8);
    case KvPageFormat::kCommVq:
      return 2 * H * P + 48 * H * k.cvq_rounds + H * k.cvq_value_rounds * (D / 8) * P;
  }
  return 0;
}

// env `name`=1,16,...: those integers; unset: `fallback`.
std::vector<int> IntListFromEnv(const char* name, std::vector<int> fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr) return fallback;
  std::vector<int> out;
  for (const char* c = e; *c;) {
    out.push_back(std::atoi(c));
    while (*c && *c != ',') ++c;
    if (*c == ',') ++c;
  }
  return out;
}

using vqserve::bench::CopyCeiling;
using vqserve::bench::Median;

}  // namespace

int main(int argc, char** argv) {
  FILE* csv = argc > 1 && std::string(argv[1]) != "-" ? std::fopen(argv[1], "w") : nullptr;
  const std::string only_kernel = argc > 4 ? argv[2] : "";
  const int only_batch = argc > 4 ? std::atoi(argv[3]) : 0, only_ctx = argc > 4 ? std::atoi(argv[4]) : 0;
  const double ceiling = CopyCeiling(size_t{4} << 30);
  std::printf("copy ceiling (read+write): %.1f GB/s\n", ceiling / 1e9);
  if (csv) std::fprintf(csv, "kernel,batch,context,time_us,bytes,gbps,pct_of_copy\n");
  if (csv) std::fprintf(csv, "copy,0,0,0,0,%.1f,100\n", ceiling / 1e9);
  // the kernels production dispatches, with the books the runtime gives them (vecinfer: fp16
  // key and value book copies, as CudaKvCache makes them).
  const std::vector<Kernel> kernels = {
      {"fp16-paged", KvPageFormat::kFp16, 2, 4, 4, 0},
      {"kivi-k2v2", KvPageFormat::kKivi, 2, 4, 4, 128},
      {"kivi-k4v4", KvPageFormat::kKivi, 4, 4, 4, 128},
      {"vecinfer-k2v2", KvPageFormat::kVecInfer, 2, 4, 4, 128, 0, 0, 8, 8, 2},
      {"vecinfer-k2v2-pca", KvPageFormat::kVecInfer, 2, 4, 4, 128, 0, 0, 8, 8, 1, true},
      {"vecinfer-k2.375v2-pca", KvPageFormat::kVecInfer, 2, 4, 4, 128, 0, 0, 8, 8, 1, true, 19},
      {"vecinfer-k4v4", KvPageFormat::kVecInfer, 2, 2, 2, 128},
      {"vecinfer-k1v1", KvPageFormat::kVecInfer, 2, 8, 8, 128, 0, 0, 8, 8, 2},
      {"vecinfer-k2v1", KvPageFormat::kVecInfer, 2, 4, 8, 128, 0, 0, 8, 8, 2},
      {"vecinfer-k3v3", KvPageFormat::kVecInfer, 2, 4, 4, 128, 0, 0, 12, 12},
      {"vecinfer-k1.5v1.5", KvPageFormat::kVecInfer, 2, 8, 8, 128, 0, 0, 12, 12},
      {"commvq-1", KvPageFormat::kCommVq, 2, 4, 4, 128, 11, 1},
      {"commvq-2", KvPageFormat::kCommVq, 2, 4, 4, 128, 21, 2},
  };
  const char* only_env = std::getenv("BENCH_KERNELS");
  const std::string only_list = only_env ? "," + std::string(only_env) + "," : "";
  const char* sizes_env = std::getenv("BENCH_SIZES");
  const std::string sizes_list = sizes_env ? "," + std::string(sizes_env) + "," : "";
  const std::vector<int> batches = IntListFromEnv("BENCH_BATCHES", {1, 8, 16, 32});
  const std::vector<int> contexts = IntListFromEnv("BENCH_CONTEXTS", {8192, 32768, 131072});
  cudaEvent_t e0, e1;
  VQ_CUDA_CHECK(cudaEventCreate(&e0));
  VQ_CUDA_CHECK(cudaEventCreate(&e1));
  std::printf("%-16s %5s %7s %10s %9s %6s\n", "kernel", "batch", "context", "time_us", "GB/s", "%copy");
  for (const Kernel& k : kernels) {
    for (int batch : batches) {
      for (int ctx : contexts) {
        if (!only_kernel.empty() && (k.name != only_kernel || batch != only_batch || ctx != only_ctx)) continue;
        if (!only_list.empty() && only_list.find("," + k.name + ",") == std::string::npos) continue;
        const std::string size = "," + std::to_string(batch) + "x" + std::to_string(ctx) + ",";
        if (!sizes_list.empty() && sizes_list.find(size) == std::string::npos) continue;
        const int coded = ctx - k.residual, res = k.residual;
        const int pages_per_seq = coded / kPage;
        const size_t page_bytes = LayerPageBytes(k);  // one layer per page here
        const size_t pool = page_bytes * pages_per_seq * batch;
        // rotate among copies so that every timed call reads at least ~256 MB of fresh data.
        const int copies = static_cast<int>(std::min<size_t>(16, (size_t{256} << 20) / pool + 1));
        uint8_t* pages;
        VQ_CUDA_CHECK(cudaMalloc(&pages, pool * copies));
        if (k.format == KvPageFormat::kFp16) {
          FillHalves<<<8192, 256>>>(reinterpret_cast<__half*>(pages), pool * copies / 2, 11, -1.7f, 1.7f);
        } else {
          FillBytes<<<8192, 256>>>(pages, pool * copies, 12);
        }
        if (k.format == KvPageFormat::kCommVq) {
          FillCommVqScales<<<4096, 256>>>(pages, static_cast<size_t>(pages_per_seq) * batch * copies, page_bytes,
                                          kKvHeads * kPage, 19);
        }
        if (k.format == KvPageFormat::kKivi) {
          // min/scale headers: sane fp16 values in every page.
          const size_t hdr = 2 * kKvHeads * kDim + 2 * kKvHeads * kPage * (kDim / 32);
          std::vector<__half> h(hdr);
          for (size_t i = 0; i < hdr; ++i) {
            const bool scale = (i >= kKvHeads * kDim && i < 2 * kKvHeads * kDim) || i >= 2 * kKvHeads * kDim + kKvHeads * kPage * (kDim / 32);
            h[i] = __float2half(scale ? 1.0f / 3 : -0.5f);
          }
          for (size_t pg = 0; pg < static_cast<size_t>(pages_per_seq) * batch * copies; ++pg) {
            VQ_CUDA_CHECK(cudaMemcpyAsync(pages + pg * page_bytes, h.data(), hdr * 2, cudaMemcpyHostToDevice));
          }
        }
        std::vector<int32_t> table(static_cast<size_t>(batch) * pages_per_seq);
        for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
        std::vector<int32_t> coded_lens(batch, coded), res_lens(batch, res), slots(batch);
        for (int b = 0; b < batch; ++b) slots[b] = b;
        const int ring = std::max(res, 1) + kPage;
        int32_t *d_table, *d_coded, *d_res, *d_slots;
        __half *ring_k, *ring_v;
        float *q, *qt, *out, *ws, *ck, *cv;
        const size_t ring_elems = static_cast<size_t>(batch) * ring * kKvHeads * kDim;
        VQ_CUDA_CHECK(cudaMalloc(&d_table, table.size() * 4 + 4));
        VQ_CUDA_CHECK(cudaMalloc(&d_coded, batch * 4));
        VQ_CUDA_CHECK(cudaMalloc(&d_res, batch * 4));
        VQ_CUDA_CHECK(cudaMalloc(&d_slots, batch * 4));
        VQ_CUDA_CHECK(cudaMalloc(&ring_k, ring_elems * 2));
        VQ_CUDA_CHECK(cudaMalloc(&ring_v, ring_elems * 2));
        VQ_CUDA_CHECK(cudaMalloc(&q, size_t{4} * batch * kHeads * kDim));
        VQ_CUDA_CHECK(cudaMalloc(&qt, size_t{4} * batch * kHeads * kDim));
        VQ_CUDA_CHECK(cudaMalloc(&out, size_t{4} * batch * kHeads * kDim));
        VQ_CUDA_CHECK(cudaMalloc(&ws, 4 * vqserve::cuda::DecodeWorkspaceFloats(batch, kHeads, kDim)));
        // vecinfer: one (2^bits, D) book each; commvq: (kv heads, R, 64, D) keys, (kv heads, Rv, 256, D) values.
        const size_t ck_floats = k.format == KvPageFormat::kCommVq ? size_t{1} * kKvHeads * k.cvq_rounds * 64 * kDim
                                 : (static_cast<size_t>(kDim) << k.k_code_bits) * (k.pca ? kKvHeads : 1);
        const size_t cv_floats = k.format == KvPageFormat::kCommVq ? size_t{1} * kKvHeads * k.cvq_value_rounds * 256 * kDim : static_cast<size_t>(kDim) << k.v_code_bits;
        VQ_CUDA_CHECK(cudaMalloc(&ck, 4 * ck_floats));
        VQ_CUDA_CHECK(cudaMalloc(&cv, 4 * cv_floats));
        VQ_CUDA_CHECK(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
        VQ_CUDA_CHECK(cudaMemcpy(d_coded, coded_lens.data(), batch * 4, cudaMemcpyHostToDevice));
        VQ_CUDA_CHECK(cudaMemcpy(d_res, res_lens.data(), batch * 4, cudaMemcpyHostToDevice));
        VQ_CUDA_CHECK(cudaMemcpy(d_slots, slots.data(), batch * 4, cudaMemcpyHostToDevice));
        FillHalves<<<1024, 256>>>(ring_k, ring_elems, 13, -1.7f, 1.7f);
        FillHalves<<<1024, 256>>>(ring_v, ring_elems, 14, -1.7f, 1.7f);
        FillFloats<<<256, 256>>>(q, size_t{1} * batch * kHeads * kDim, 15, -1.7f, 1.7f);
        FillFloats<<<256, 256>>>(qt, size_t{1} * batch * kHeads * kDim, 16, -1.7f, 1.7f);
        FillFloats<<<256, 256>>>(ck, ck_floats, 17, k.format == KvPageFormat::kCommVq ? -0.1f : -1.2f,
                                 k.format == KvPageFormat::kCommVq ? 0.1f : 1.2f);
        FillFloats<<<256, 256>>>(cv, cv_floats, 18, -1.7f, 1.7f);
        uint16_t *hk = nullptr, *hv = nullptr;  // fp16 copies of the (shared) books
        if (k.half_books) {
          const size_t n = vqserve::cuda::VecInferHalfBookElems(1, kDim);
          VQ_CUDA_CHECK(cudaMalloc(&hk, n * 2));
          VQ_CUDA_CHECK(cudaMalloc(&hv, n * 2));
          std::string e = vqserve::cuda::LaunchVecInferHalfBooks(cv, 1, kDim, k.dv, hv, nullptr);
          if (e.empty() && k.half_books == 2) e = vqserve::cuda::LaunchVecInferHalfBooks(ck, 1, kDim, k.dk, hk, nullptr);
          if (!e.empty()) std::printf("half books: %s\n", e.c_str());
        }
        VQ_CUDA_CHECK(cudaDeviceSynchronize());

        int32_t* k_dims = nullptr;  // -pca: sub-vector sizes 1 .. 8 (the pattern sums to 64), rotated per kv head
        void* lut = nullptr;
        const int mk = KeyCodes(k);
        if (k.pca) {
          const std::vector<int> sizes16 = {1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5, 5, 6, 6, 6, 8};
          const std::vector<int> sizes19 = {1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6};  // sum 64
          const std::vector<int>& sizes = mk % 19 == 0 ? sizes19 : sizes16;  // 38: sizes19 twice
          std::vector<int32_t> dims;
          for (int h = 0; h < kKvHeads; ++h) {
            for (int m = 0; m < mk; ++m) dims.push_back(sizes[(m + h) % sizes.size()]);
          }
          VQ_CUDA_CHECK(cudaMalloc(&k_dims, dims.size() * 4));
          VQ_CUDA_CHECK(cudaMemcpy(k_dims, dims.data(), dims.size() * 4, cudaMemcpyHostToDevice));
          VQ_CUDA_CHECK(cudaMalloc(&lut, vqserve::cuda::VecInferPcaLutBytes(batch, kHeads, mk)));
        }

        DecodeAttentionParams p;
        p.q = q;
        p.q_tilde = qt;
        p.q_head_stride = kDim;
        p.q_batch_stride = kHeads * kDim;
        p.out = out;
        p.out_head_stride = kDim;
        p.out_batch_stride = kHeads * kDim;
        p.batch = batch;
        p.num_heads = kHeads;
        p.num_kv_heads = kKvHeads;
        p.head_dim = kDim;
        p.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
        if (const char* e = std::getenv("BENCH_SPLITS")) p.num_splits = std::atoi(e);  // forced; 0 chooses
        p.page_stride = static_cast<int64_t>(page_bytes);
        p.layer_offset = 0;
        p.block_tables = d_table;
        p.block_table_stride = pages_per_seq;
        p.coded_lens = d_coded;
        p.max_coded_len = coded;
        p.res_k = reinterpret_cast<const uint16_t*>(ring_k);
        p.res_v = reinterpret_cast<const uint16_t*>(ring_v);
        p.res_head_stride = kDim;
        p.res_token_stride = kKvHeads * kDim;
        p.res_slot_stride = static_cast<int64_t>(ring) * kKvHeads * kDim;
        p.res_ring_tokens = ring;
        p.slots = d_slots;
        p.res_lens = res > 0 ? d_res : nullptr;
        p.kivi_bits = k.kivi_bits;
        p.vq_k_codebook = ck;
        p.vq_v_codebook = cv;
        p.vq_v_codebook_f16 = k.half_books ? hv : nullptr;
        p.vq_k_codebook_f16 = k.half_books == 2 ? hk : nullptr;
        p.vq_k_sub_dim = k.dk;
        p.vq_v_sub_dim = k.dv;
        p.vq_k_code_bits = k.k_code_bits;
        p.vq_v_code_bits = k.v_code_bits;
        if (k.pca) {
          p.vq_k_dims = k_dims;
          p.vq_pca_lut = lut;
          p.vq_k_codes = mk;
          p.vq_k_codebook_head_stride = static_cast<int64_t>(kDim) << k.k_code_bits;
        }
        if (k.format == KvPageFormat::kCommVq) {
          p.commvq_key_rounds = k.cvq_rounds;
          p.commvq_value_rounds = k.cvq_value_rounds;
          p.rope_theta = 500000.0f;
          p.vq_k_codebook_head_stride = static_cast<int64_t>(k.cvq_rounds) * 64 * kDim;
          p.vq_v_codebook_head_stride = static_cast<int64_t>(k.cvq_value_rounds) * 256 * kDim;
        }
        p.workspace = ws;
        std::vector<float> ms;
        std::string err;
        for (int it = 0; it < 25 && err.empty(); ++it) {
          p.pages = pages + (it % copies) * pool;
          VQ_CUDA_CHECK(cudaEventRecord(e0));
          err = vqserve::cuda::LaunchDecodeAttention(k.format, p, nullptr);
          VQ_CUDA_CHECK(cudaEventRecord(e1));
          VQ_CUDA_CHECK(cudaEventSynchronize(e1));
          float t;
          VQ_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
          if (it >= 5) ms.push_back(t);
        }
        if (!err.empty()) {
          std::printf("%s batch %d ctx %d: %s\n", k.name.c_str(), batch, ctx, err.c_str());
        } else {
          const double us = Median(ms) * 1e3;
          const double bytes = static_cast<double>(pool) + 2.0 * batch * res * kKvHeads * kDim * 2 +
                               2.0 * 4 * batch * kHeads * kDim;
          const double gbps = bytes / (us * 1e-6) / 1e9;
          std::printf("%-16s %5d %7d %10.1f %9.1f %6.1f   (splits %d)\n", k.name.c_str(), batch, ctx, us, gbps,
                      100.0 * gbps * 1e9 / ceiling, vqserve::cuda::ChooseDecodeSplits(k.format, p));
          if (csv) std::fprintf(csv, "%s,%d,%d,%.2f,%.0f,%.1f,%.1f\n", k.name.c_str(), batch, ctx, us, bytes, gbps,
                                100.0 * gbps * 1e9 / ceiling);
        }
        for (void* ptr : std::vector<void*>{pages, d_table, d_coded, d_res, d_slots, ring_k, ring_v, q, qt, out, ws, ck, cv, hk, hv, k_dims, lut}) {
          VQ_CUDA_CHECK(cudaFree(ptr));
        }
      }
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}
