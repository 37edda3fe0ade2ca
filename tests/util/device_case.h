#ifndef VQSERVE_TESTS_UTIL_DEVICE_CASE_H_
#define VQSERVE_TESTS_UTIL_DEVICE_CASE_H_

// copies a host DecodeCase (tests/util/decode_case.h) to the gpu and fills the kernels' params.

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/common/vecinfer_half_books.h"
#include "tests/util/decode_case.h"

namespace vqserve::testing {

// device copies of one case; freed on destruction.
class DeviceDecodeCase {
 public:
  explicit DeviceDecodeCase(const DecodeCase& c) {
    const DecodeCaseSpec& s = c.spec;
    cuda::DecodeAttentionParams& p = params_;
    p.batch = c.batch;
    p.num_heads = s.num_heads;
    p.num_kv_heads = s.num_kv_heads;
    p.head_dim = s.head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    p.q = Upload(c.q);
    p.q_tilde = Upload(c.q_tilde);
    p.q_head_stride = s.head_dim;
    p.q_batch_stride = static_cast<int64_t>(s.num_heads) * s.head_dim;
    out_elems_ = c.q.size();
    p.out = Alloc<float>(out_elems_);
    p.out_head_stride = s.head_dim;
    p.out_batch_stride = static_cast<int64_t>(s.num_heads) * s.head_dim;
    p.pages = Upload(c.pages);
    p.page_stride = static_cast<int64_t>(c.page_bytes);
    p.layer_offset = static_cast<int64_t>(s.layer) * c.layer_page_bytes;
    p.page_tokens = c.page_tokens;
    p.block_tables = Upload(c.block_tables);
    p.block_table_stride = c.block_table_stride;
    p.coded_lens = Upload(c.coded_lens);
    for (int n : c.coded_lens) p.max_coded_len = n > p.max_coded_len ? n : p.max_coded_len;
    p.res_k = Upload(c.ring_k);
    p.res_v = Upload(c.ring_v);
    p.res_head_stride = s.head_dim;
    p.res_token_stride = static_cast<int64_t>(s.num_kv_heads) * s.head_dim;
    p.res_slot_stride = p.res_token_stride * c.ring_tokens;
    p.res_ring_tokens = c.ring_tokens;
    p.slots = Upload(c.slots);
    p.res_lens = Upload(c.res_lens);
    p.kivi_bits = s.kivi_bits;
    if (!c.k_codebook.empty()) {
      p.vq_k_codebook = Upload(c.k_codebook);
      p.vq_v_codebook = Upload(c.v_codebook);
      p.vq_k_codebook_head_stride = s.vq_per_head ? int64_t{s.head_dim} << s.vq_k_code_bits : 0;
      p.vq_v_codebook_head_stride = s.vq_per_head ? int64_t{s.head_dim} << s.vq_v_code_bits : 0;
      num_books_ = s.vq_per_head ? s.num_kv_heads : 1;
    }
    p.vq_k_sub_dim = s.vq_k_sub_dim;
    p.vq_v_sub_dim = s.vq_v_sub_dim;
    p.vq_k_code_bits = s.vq_k_code_bits;
    p.vq_v_code_bits = s.vq_v_code_bits;
    p.workspace = Alloc<float>(cuda::DecodeWorkspaceFloats(c.batch, s.num_heads, s.head_dim));
  }
  ~DeviceDecodeCase() {
    for (void* ptr : owned_) cudaFree(ptr);
  }
  DeviceDecodeCase(const DeviceDecodeCase&) = delete;
  DeviceDecodeCase& operator=(const DeviceDecodeCase&) = delete;

  cuda::DecodeAttentionParams& params() { return params_; }
  // vecinfer of the shapes VecInferTakesHalfBooks names: fp16 code-major copies of the
  // books (vecinfer_half_books.h) made on the gpu into the params: the values' and, with `keys`,
  // the keys'. false for other shapes (params unchanged).
  bool UploadHalfBooks(bool keys) {
    cuda::DecodeAttentionParams& p = params_;
    if (num_books_ == 0 ||
        !cuda::VecInferTakesHalfBooks(p.head_dim, p.vq_k_sub_dim, p.vq_v_sub_dim, p.vq_k_code_bits, p.vq_v_code_bits)) {
      return false;
    }
    const size_t n = cuda::VecInferHalfBookElems(num_books_, p.head_dim);
    uint16_t* v = Alloc<uint16_t>(n);
    HalfBooksOrDie(cuda::LaunchVecInferHalfBooks(p.vq_v_codebook, num_books_, p.head_dim, p.vq_v_sub_dim, v, nullptr));
    p.vq_v_codebook_f16 = v;
    if (keys) {
      uint16_t* k = Alloc<uint16_t>(n);
      HalfBooksOrDie(cuda::LaunchVecInferHalfBooks(p.vq_k_codebook, num_books_, p.head_dim, p.vq_k_sub_dim, k, nullptr));
      p.vq_k_codebook_f16 = k;
    }
    VQ_CUDA_CHECK(cudaDeviceSynchronize());
    return true;
  }
  // vecinfer -pca keys: per kv head key books and sub-vector sizes already on the device (the
  // layer's slices of a CudaKvCache's constants, CudaVecInferConstants), and the lut scratch;
  // k_codes key codes a token (0: head_dim / vq_k_sub_dim).
  void UsePcaKeys(const float* k_books, const int32_t* k_dims, int k_codes = 0) {
    cuda::DecodeAttentionParams& p = params_;
    p.vq_k_codebook = k_books;
    p.vq_k_codebook_head_stride = int64_t{p.head_dim} << p.vq_k_code_bits;
    p.vq_k_dims = k_dims;
    p.vq_k_codes = k_codes;
    p.vq_pca_lut = Alloc<uint8_t>(cuda::VecInferPcaLutBytes(p.batch, p.num_heads, cuda::VecInferKeyCodes(p)));
  }
  // fills the output with nan so that unwritten elements show.
  void PoisonOutput() { VQ_CUDA_CHECK(cudaMemset(params_.out, 0xff, out_elems_ * sizeof(float))); }
  std::vector<float> Output() const {
    std::vector<float> out(out_elems_);
    VQ_CUDA_CHECK(cudaMemcpy(out.data(), params_.out, out_elems_ * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  static void HalfBooksOrDie(const std::string& err) {
    if (err.empty()) return;
    std::fprintf(stderr, "vecinfer half books: %s\n", err.c_str());
    std::abort();
  }
  template <class T>
  T* Alloc(size_t n) {
    void* ptr = nullptr;
    VQ_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T) + 16));
    owned_.push_back(ptr);
    return static_cast<T*>(ptr);
  }
  template <class T>
  T* Upload(const std::vector<T>& v) {
    T* d = Alloc<T>(v.size());
    if (!v.empty()) VQ_CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  }

  cuda::DecodeAttentionParams params_;
  size_t out_elems_ = 0;
  int num_books_ = 0;  // vecinfer books (kv heads or 1 when shared), 0 for other formats
  std::vector<void*> owned_;
};

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_DEVICE_CASE_H_
