#include "runtime/cuda/cuda_weight_matrix.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cuda/model/random_fill.h"
#include "kernels/cuda/weights/block_weights.h"

namespace vqserve {
namespace {

constexpr int kF16 = static_cast<int>(GgmlType::kF16);

void Check(const std::string& err, const char* what) {
  if (!err.empty()) {
    std::fprintf(stderr, "CudaWeightMatrix: %s: %s\n", what, err.c_str());
    std::abort();
  }
}

cuda::BlockFormat FormatOf(int type) { return static_cast<cuda::BlockFormat>(type); }

int64_t RowBytes(int type, int64_t cols) {
  return type == kF16 ? 2 * cols : cuda::BlockRowBytes(FormatOf(type), cols);
}

}  // namespace

bool KeepsBlocks(const GgufTensor& t, int64_t cols) {
  const int type = static_cast<int>(t.type);
  return cuda::IsBlockFormat(type) && cols % cuda::BlockElements(FormatOf(type)) == 0 &&
         t.nbytes == size_t(t.num_elements() / cols * RowBytes(type, cols));
}

void HalfGemm(cublasHandle_t blas, const __half* x, const __half* w, float* y, int n, int cols,
              int rows, int64_t ldy, bool accumulate) {
  // column-major view: yᵀ (rows, n) = w (cols, rows)ᵀ · xᵀ (cols, n), yᵀ's leading dim ldy.
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasStatus_t s =
      cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16F, cols, x,
                   CUDA_R_16F, cols, &beta, y, CUDA_R_32F, static_cast<int>(ldy),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) Check(cublasGetStatusString(s), "cublasGemmEx");
}

absl::Status CudaWeightMatrix::Append(const GgufFile& file, const std::string& name,
                                      int64_t rows, int64_t cols, bool blocks) {
  const GgufTensor* t = file.FindTensor(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat(file.path(), ": missing tensor '", name, "'"));
  }
  if (t->dims != std::vector<int64_t>{cols, rows} || (cols_ != 0 && cols != cols_)) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor '", name,
                                                   "' has dims [", absl::StrJoin(t->dims, ", "),
                                                   "], expected [", cols, ", ", rows, "]"));
  }
  cols_ = cols;
  const int file_type = static_cast<int>(t->type);
  // kept as they are: the resident block formats, and fp16 (a 16 GB F16 8B file took 70 s to
  // load through fp32); anything else dequantized to fp16.
  const bool raw = (blocks && KeepsBlocks(*t, cols)) ||
                   (file_type == kF16 && t->nbytes == size_t(rows * cols * 2));
  const int type = raw ? file_type : kF16;
  if (segments_.empty() || segments_.back().type != type) segments_.emplace_back().type = type;
  Segment& s = segments_.back();
  if (raw) {
    s.host.insert(s.host.end(), t->data, t->data + t->nbytes);
  } else {
    absl::StatusOr<std::vector<float>> f = file.ReadTensorF32(name);
    if (!f.ok()) return f.status();
    const size_t at = s.host.size();
    s.host.resize(at + f->size() * 2);
    cpu::FloatToHalfRow(f->data(), reinterpret_cast<uint16_t*>(s.host.data() + at),
                        static_cast<int64_t>(f->size()));
  }
  s.rows += rows;
  rows_ += rows;
  return absl::OkStatus();
}

void CudaWeightMatrix::Upload() {
  for (Segment& s : segments_) {
    if (s.host.empty()) continue;
    s.data.Upload(s.host);
    s.host = std::vector<uint8_t>();
  }
}

void CudaWeightMatrix::AppendRandom(int type, int64_t rows, int64_t cols, float amplitude,
                                    uint64_t seed, cudaStream_t stream) {
  cols_ = cols;
  Segment& s = segments_.emplace_back();
  s.type = type;
  s.rows = rows;
  s.data.Reserve(size_t(rows * RowBytes(type, cols)));
  if (type == kF16) {
    Check(cuda::LaunchFillRandomHalf(reinterpret_cast<__half*>(s.data.data()), rows * cols,
                                     amplitude, 0.0f, seed, stream),
          "random fp16 weights");
  } else {
    Check(cuda::LaunchFillRandomBlocks(FormatOf(type), s.data.data(), rows,
                                       static_cast<int>(cols), amplitude, seed, stream),
          "random block weights");
  }
  rows_ += rows;
}

int64_t CudaWeightMatrix::bytes() const {
  int64_t b = 0;
  for (const Segment& s : segments_) b += s.rows * RowBytes(s.type, cols_);
  return b;
}

int64_t CudaWeightMatrix::ScratchWanted(int64_t cap) const {
  int64_t want = 0;
  for (const Segment& s : segments_) {
    if (s.type == kF16) continue;
    const int64_t gemv_halves = (cuda::BlockGemvScratchBytes(static_cast<int>(cols_)) + 1) / 2;
    want = std::max({want, std::min(s.rows * cols_, cap), gemv_halves});
  }
  return want;
}

void CudaWeightMatrix::Multiply(const __half* x, int n, float* y, bool accumulate,
                                const CudaMatmulContext& ctx) const {
  const int cols = static_cast<int>(cols_);
  int64_t r0 = 0;
  for (const Segment& s : segments_) {
    const int rows = static_cast<int>(s.rows);
    if (s.type == kF16) {
      HalfGemm(ctx.blas, x, reinterpret_cast<const __half*>(s.data.data()), y + r0, n, cols, rows,
               rows_, accumulate);
    } else if (n <= cuda::kBlockGemvMaxColumns) {
      if (ctx.scratch == nullptr || 2 * ctx.scratch_halves < cuda::BlockGemvScratchBytes(cols)) {
        Check("scratch smaller than BlockGemvScratchBytes", "block gemv");
      }
      Check(cuda::LaunchBlockGemv(FormatOf(s.type), s.data.data(), rows, cols, x, cols, n,
                                  y + r0, rows_, accumulate, ctx.scratch, ctx.stream),
            "block gemv");
    } else {
      // prefill-size batches: row tiles dequantized to the fp16 scratch, then cublas.
      const int64_t tile = std::max<int64_t>(1, ctx.scratch_halves / cols_);
      if (ctx.scratch == nullptr || ctx.scratch_halves < cols_) Check("no scratch", "multiply");
      const int64_t row_bytes = RowBytes(s.type, cols_);
      for (int64_t t0 = 0; t0 < rows; t0 += tile) {
        const int tr = static_cast<int>(std::min<int64_t>(tile, rows - t0));
        Check(cuda::LaunchDequantizeToHalf(FormatOf(s.type), s.data.data() + t0 * row_bytes, tr,
                                           cols, ctx.scratch, ctx.stream),
              "dequantize to fp16");
        HalfGemm(ctx.blas, x, ctx.scratch, y + r0 + t0, n, cols, tr, rows_, accumulate);
      }
    }
    r0 += rows;
  }
}

void CudaWeightMatrix::GatherRows(const int32_t* ids, int n, float* out,
                                  cudaStream_t stream) const {
  if (segments_.size() != 1 || segments_[0].type == kF16) Check("not one block segment", "gather");
  Check(cuda::LaunchGatherRows(FormatOf(segments_[0].type), segments_[0].data.data(), ids, n,
                               static_cast<int>(cols_), out, stream),
        "gather rows");
}

}  // namespace vqserve
