// `--gpu-weights` of vqserve serve and generate (tools/vqserve/gpu_weights_flag.h): quantized
// GGUF tensors stay in their blocks on cuda unless the flag says fp16; bad values and blocks
// on the cpu are one-line errors.
#include "tools/vqserve/gpu_weights_flag.h"

#include <gtest/gtest.h>

namespace vqserve::cli {
namespace {

TEST(GpuWeightsFlag, NotGivenIsBlocksOnCuda) {
  CudaWeights w = CudaWeights::kFp16;
  EXPECT_EQ(ParseGpuWeights("", "cuda", &w), "");
  EXPECT_EQ(w, CudaWeights::kBlocks);
  w = CudaWeights::kBlocks;
  EXPECT_EQ(ParseGpuWeights("", "cpu", &w), "");
  EXPECT_EQ(w, CudaWeights::kFp16);
}

TEST(GpuWeightsFlag, ExplicitValues) {
  CudaWeights w = CudaWeights::kBlocks;
  EXPECT_EQ(ParseGpuWeights("fp16", "cuda", &w), "");
  EXPECT_EQ(w, CudaWeights::kFp16);
  EXPECT_EQ(ParseGpuWeights("blocks", "cuda", &w), "");
  EXPECT_EQ(w, CudaWeights::kBlocks);
  EXPECT_EQ(ParseGpuWeights("fp16", "cpu", &w), "");
}

TEST(GpuWeightsFlag, BadValuesAreOneLine) {
  CudaWeights w = CudaWeights::kFp16;
  EXPECT_EQ(ParseGpuWeights("q4", "cuda", &w), "--gpu-weights must be fp16 or blocks (got 'q4')");
  EXPECT_EQ(ParseGpuWeights("blocks", "cpu", &w), "--gpu-weights blocks needs --device cuda");
}

}  // namespace
}  // namespace vqserve::cli
