#ifndef VQSERVE_RUNTIME_CUDA_CUDA_WEIGHT_MATRIX_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_WEIGHT_MATRIX_H_

// a weight matrix of the cuda model, (rows, cols) in device memory as row-stacked segments
// (e.g. q, k and v), each fp16 or a resident ggml block format (kernels/cuda/weights/), and
// its product with a batch of fp16 activations: cublas for fp16 segments; for block segments
// the fused dequantize-and-multiply kernel up to kBlockGemvMaxColumns columns, else the
// segment dequantized to fp16 in row tiles of a scratch buffer and multiplied by cublas.

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/cuda/cuda_device_array.h"
#include "runtime/gguf/gguf_file.h"

namespace vqserve {

// what a product needs besides the operands: the stream, cublas on it, and the scratch of
// block segments (scratch_halves fp16 elements: prefill-size products' dequantized row tiles,
// decode-size ones' int8 runs of x).
struct CudaMatmulContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  __half* scratch = nullptr;
  int64_t scratch_halves = 0;
};

class CudaWeightMatrix {
 public:
  // appends gguf tensor `name` (dims {cols, rows}) below the rows so far: in its block format
  // when `blocks` and the type is one the gpu keeps (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k), else
  // dequantized to fp16. adjacent tensors of one format share a segment. the data stays on the
  // host until Upload. errors name the file and the tensor.
  absl::Status Append(const GgufFile& file, const std::string& name, int64_t rows, int64_t cols,
                      bool blocks);
  // uploads what Append gathered.
  void Upload();
  // appends `rows` pseudo-random rows made on the device: ggml type `type` (a block format, or
  // 1 for fp16), values within about ±amplitude.
  void AppendRandom(int type, int64_t rows, int64_t cols, float amplitude, uint64_t seed,
                    cudaStream_t stream);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // device bytes of the weights.
  int64_t bytes() const;
  // the one segment's ggml type when there is one segment, else -1.
  int single_type() const { return segments_.size() == 1 ? segments_[0].type : -1; }
  // fp16 elements of scratch a product wants (0: none, all fp16): up to `cap` for the row tiles
  // of more than kBlockGemvMaxColumns columns, at least the block gemv's (BlockGemvScratchBytes).
  int64_t ScratchWanted(int64_t cap) const;

  // y (n, rows) fp32 (+)= x (n, cols) fp16 · thisᵀ, fp32 accumulation. aborts on a launch
  // error (a broken device or a programming error).
  void Multiply(const __half* x, int n, float* y, bool accumulate,
                const CudaMatmulContext& ctx) const;
  // out (n, cols) fp32 = rows ids[i] (single-segment block matrices: the embedding gather).
  void GatherRows(const int32_t* ids, int n, float* out, cudaStream_t stream) const;

 private:
  struct Segment {
    int type = 1;  // ggml type id: 1 (F16) or a block format
    int64_t rows = 0;
    std::vector<uint8_t> host;  // until Upload
    DeviceArray<uint8_t> data;
  };
  std::deque<Segment> segments_;  // a deque: DeviceArray does not move
  int64_t rows_ = 0, cols_ = 0;
};

// whether the gpu keeps tensor `t` of `cols` columns in its block format (q8_0, q4_0, q4_1,
// q4_k, q5_k, q6_k, cols a multiple of the block size) when asked to.
bool KeepsBlocks(const GgufTensor& t, int64_t cols);

// y (n, ldy) fp32, its first `rows` columns (+)= x (n, cols) fp16 · w (rows, cols) fp16ᵀ with
// fp32 accumulation (cublas; aborts on an error).
void HalfGemm(cublasHandle_t blas, const __half* x, const __half* w, float* y, int n, int cols,
              int rows, int64_t ldy, bool accumulate);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_WEIGHT_MATRIX_H_
