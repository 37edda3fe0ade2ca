#ifndef VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_WEIGHTS_H_
#define VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_WEIGHTS_H_

// matrices kept in a ggml block format on the device (block_formats.h): the fused
// dequantize-and-multiply kernel of decode-size batches, the dequantization to fp16 (prefill
// batches multiply that with cublas), the embedding gather, and random blocks for benchmarks.
// a matrix w is (rows, cols), row r's blocks at w + r * BlockRowBytes(format, cols); cols a
// multiple of the block size. launchers return an empty string on success, else the error.

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/weights/block_formats.h"

namespace vqserve::cuda {

// the most batch columns one pass of LaunchBlockGemv takes; more run in passes of this many,
// each reading the weights again.
constexpr int kBlockGemvMaxColumns = 16;
// passes of up to this many columns multiply in integers: x quantized to int8 in runs of 16
// elements (x_k ~ d q_k, d = the run's max |x_k| / 127, q_k rounded to nearest even), each
// run's sum of weight quants times q_k exact, then scaled in fp32 (llama.cpp's q8_1 and
// dp4a, with runs of 16 instead of 32). wider passes multiply on tensor cores, the weights
// dequantized to fp16 (as the fp16 weights' cublas path). 2: on the H200 at the 8B shape the
// tensor cores are faster from 3 columns (8B decode step, ms: 3 columns 4.51-4.56 against
// 4.74-4.82 in integers, 4 columns 4.52-4.59 against 5.02-5.16; 2 columns 4.45 against 3.81-3.88).
constexpr int kBlockGemvIntColumns = 2;

// bytes of device scratch LaunchBlockGemv needs for rows of `cols` elements (x's int8 runs, or
// x's 16 columns permuted for the tensor cores: 32 cols bytes).
int64_t BlockGemvScratchBytes(int cols);

// y (n, ldy) fp32, columns [0, rows): y[j][r] (+)= sum_k x[j][k] * w[r][k], x (n, ldx) fp16,
// fp32 accumulation (x quantized as above in passes up to kBlockGemvIntColumns columns, wider
// ones permuted, into `scratch` of BlockGemvScratchBytes(cols) bytes); each weight byte read
// once per pass.
// n >= 1; w, x and scratch 16-byte aligned.
std::string LaunchBlockGemv(BlockFormat format, const uint8_t* w, int rows, int cols,
                            const __half* x, int64_t ldx, int n, float* y, int64_t ldy,
                            bool accumulate, void* scratch, cudaStream_t stream);

// out (rows, cols) fp16 = w (rows, cols), round to nearest even.
std::string LaunchDequantizeToHalf(BlockFormat format, const uint8_t* w, int64_t rows, int cols,
                                   __half* out, cudaStream_t stream);

// out (n, cols) fp32 = rows ids[i] of w (the embedding gather).
std::string LaunchGatherRows(BlockFormat format, const uint8_t* w, const int32_t* ids, int n,
                             int cols, float* out, cudaStream_t stream);

// w (rows, cols): random bytes of `seed` with every block's fp16 scale fields set so that the
// values lie within about ±amplitude (benchmarks: speed does not depend on the values).
std::string LaunchFillRandomBlocks(BlockFormat format, uint8_t* w, int64_t rows, int cols,
                                   float amplitude, uint64_t seed, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_WEIGHTS_H_
