// every decode-attention op the cuda backend dispatches, run on the gpu and compared with its
// cpu reference (float64 maths over the same pages), in the spirit of llama.cpp's
// test-backend-ops: one table row per (op, page format, widths) names the kernel it reaches,
// and each row runs over head_dim 64 / 128, 1 .. 8 query heads per kv head, lengths from one
// token to several splits, the launcher's split count and a forced one. skips only where
// there is no cuda device.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention.h"
#include "tests/util/commvq_case.h"
#include "tests/util/decode_case.h"
#include "tests/util/decode_reference.h"
#include "tests/util/device_case.h"
#include "tests/util/cuda_device.h"

namespace vqserve::testing {
namespace {

// one op of the table. commvq_bits > 0: a commvq case of that many bits (CommVqCaseSpec);
// commvq_rounds overrides its key rounds (a count the warp kernel does not take: the cluster
// kernel). unaligned: the pages sit 8 bytes past an aligned address (kivi: the element-wise
// kernel). half_books: the vecinfer fp16 book copies (1 values, 2 keys + values); with 1 the
// output must equal the fp32 books' run to 1e-6.
struct Op {
  const char* name;
  const char* kernel;  // what the dispatcher runs for it
  KvPageFormat format;
  int kivi_bits = 2, dk = 4, dv = 4, residual = 128;
  bool per_head = false;
  int k_code_bits = 8, v_code_bits = 8;
  int half_books = 0;
  int commvq_bits = 0, commvq_rounds = 0;
  bool unaligned = false;
  double tolerance = 1e-3;  // relative l2 error against the float64 reference
};

const Op kOps[] = {
    {"fp16", "fp16 staged", KvPageFormat::kFp16, 2, 4, 4, 0},
    {"fp16_ring", "fp16 staged", KvPageFormat::kFp16, 2, 4, 4, 128},
    {"kivi2", "kivi staged", KvPageFormat::kKivi, 2},
    {"kivi4", "kivi staged", KvPageFormat::kKivi, 4},
    {"kivi2_noring", "kivi staged", KvPageFormat::kKivi, 2, 4, 4, 0},
    {"kivi2_unaligned", "kivi element-wise", KvPageFormat::kKivi, 2, 4, 4, 128, false, 8, 8, 0, 0,
     0, true},
    {"kivi4_unaligned", "kivi element-wise", KvPageFormat::kKivi, 4, 4, 4, 128, false, 8, 8, 0, 0,
     0, true},
    {"vecinfer_k2v2", "vecinfer tensor-core", KvPageFormat::kVecInfer},
    {"vecinfer_k2v2_perhead", "vecinfer tensor-core", KvPageFormat::kVecInfer, 2, 4, 4, 128, true},
    {"vecinfer_k2v2_halfv", "vecinfer tensor-core", KvPageFormat::kVecInfer, 2, 4, 4, 128, false,
     8, 8, 1},
    {"vecinfer_k2v2_halfkv", "vecinfer tensor-core", KvPageFormat::kVecInfer, 2, 4, 4, 128, false,
     8, 8, 2},
    {"vecinfer_k1v1", "vecinfer tensor-core", KvPageFormat::kVecInfer, 2, 8, 8},
    {"vecinfer_k1v1_halfkv", "vecinfer tensor-core", KvPageFormat::kVecInfer, 2, 8, 8, 128, false,
     8, 8, 2},
    {"vecinfer_k2v1", "vecinfer tensor-core", KvPageFormat::kVecInfer, 2, 4, 8},
    {"vecinfer_k4v4", "vecinfer lut", KvPageFormat::kVecInfer, 2, 2, 2},
    {"vecinfer_k3v3", "vecinfer generic", KvPageFormat::kVecInfer, 2, 4, 4, 128, false, 12, 12},
    {"vecinfer_k1p5v1p5", "vecinfer generic", KvPageFormat::kVecInfer, 2, 8, 8, 128, false, 12, 12},
    {"commvq1", "commvq warp", KvPageFormat::kCommVq, 2, 4, 4, 128, false, 8, 8, 0, 1},
    {"commvq2", "commvq warp", KvPageFormat::kCommVq, 2, 4, 4, 128, false, 8, 8, 0, 2},
    {"commvq_r7", "commvq cluster", KvPageFormat::kCommVq, 2, 4, 4, 128, false, 8, 8, 0, 1, 7},
};

// commvq-1 / commvq-2 key and value rounds for head_dim d (CommVqOptionsForName): R =
// round(bits * d / 12), Rv = bits; the books hold commvq-2's rounds.
CommVqCaseSpec CommVqSpec(const Op& op, int d, int group, uint64_t seed) {
  CommVqCaseSpec s;
  s.head_dim = d;
  s.key_rounds = op.commvq_rounds > 0 ? op.commvq_rounds
                                      : static_cast<int>(std::lround(op.commvq_bits * d / 12.0));
  s.value_rounds = op.commvq_bits;
  s.book_key_rounds = std::max(s.key_rounds, static_cast<int>(std::lround(2 * d / 12.0)));
  s.book_value_rounds = 2;
  s.num_kv_heads = 2;
  s.num_heads = 2 * group;
  s.lens = {1, 31, 33, 129, 161, 1000, 4133};
  s.seed = seed;
  return s;
}

DecodeCaseSpec PagedSpec(const Op& op, int d, int group, uint64_t seed) {
  DecodeCaseSpec s;
  s.format = op.format;
  s.num_kv_heads = 2;
  s.num_heads = 2 * group;
  s.head_dim = d;
  s.lens = {1, 31, 33, 161, 1000, 4133};
  s.residual_tokens = op.residual;
  s.kivi_bits = op.kivi_bits;
  s.vq_k_sub_dim = op.dk;
  s.vq_v_sub_dim = op.dv;
  s.vq_per_head = op.per_head;
  s.vq_k_code_bits = op.k_code_bits;
  s.vq_v_code_bits = op.v_code_bits;
  s.seed = seed;
  return s;
}

// the case's output for its params, poisoned first; empty and *err set on a launch error.
std::vector<float> Launch(KvPageFormat f, DeviceDecodeCase* dev, std::string* err) {
  dev->PoisonOutput();
  *err = cuda::LaunchDecodeAttention(f, dev->params(), nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return err->empty() ? dev->Output() : std::vector<float>();
}

// moves the case's pages 8 bytes past an aligned device address (freed by the caller).
uint8_t* UnalignPages(const DecodeCase& c, cuda::DecodeAttentionParams* p) {
  uint8_t* base = nullptr;
  VQ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base), c.pages.size() + 16));
  VQ_CUDA_CHECK(cudaMemcpy(base + 8, c.pages.data(), c.pages.size(), cudaMemcpyHostToDevice));
  p->pages = base + 8;
  return base;
}

class CudaBackendOpsTest
    : public ::testing::TestWithParam<std::tuple<Op, int /*head_dim*/, int /*group*/>> {};

TEST_P(CudaBackendOpsTest, MatchesCpuReference) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [op, d, group] = GetParam();
  for (int splits : {0, 7}) {
    const uint64_t seed = 100 + d + 10 * group + splits;
    DecodeCase c;
    CommVqCaseSpec cvq;
    if (op.commvq_bits > 0) {
      cvq = CommVqSpec(op, d, group, seed);
      c = MakeCommVqCase(cvq);
    } else {
      c = MakeDecodeCase(PagedSpec(op, d, group, seed));
    }
    DeviceDecodeCase dev(c);
    cuda::DecodeAttentionParams& p = dev.params();
    p.num_splits = splits;
    if (op.commvq_bits > 0) SetCommVqParams(cvq, &p);
    uint8_t* unaligned = op.unaligned ? UnalignPages(c, &p) : nullptr;
    if (op.half_books > 0) {
      ASSERT_TRUE(dev.UploadHalfBooks(op.half_books == 2)) << op.name;
    }
    std::string err;
    const std::vector<float> out = Launch(op.format, &dev, &err);
    ASSERT_EQ(err, "") << op.name;
    const std::vector<double> ref =
        op.commvq_bits > 0 ? ReferenceCommVq(c, cvq) : ReferenceDecodeAttention(c);
    EXPECT_LE(RelativeError(out, ref), op.tolerance)
        << op.name << " (" << op.kernel << ") D=" << d << " G=" << group << " splits=" << splits;
    if (op.half_books == 1) {  // fp16 value books are the bits the kernel builds itself
      p.vq_v_codebook_f16 = nullptr;
      const std::vector<float> fp32_books = Launch(op.format, &dev, &err);
      ASSERT_EQ(err, "");
      EXPECT_LE(RelativeError(out, std::vector<double>(fp32_books.begin(), fp32_books.end())),
                1e-6)
          << op.name << " D=" << d << " G=" << group;
    }
    if (unaligned != nullptr) VQ_CUDA_CHECK(cudaFree(unaligned));
  }
}

INSTANTIATE_TEST_SUITE_P(
    DecodeAttention, CudaBackendOpsTest,
    ::testing::Combine(::testing::ValuesIn(kOps), ::testing::Values(64, 128),
                       ::testing::Values(1, 3, 4, 8)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_d" +
             std::to_string(std::get<1>(info.param)) + "_g" +
             std::to_string(std::get<2>(info.param));
    });

}  // namespace
}  // namespace vqserve::testing
