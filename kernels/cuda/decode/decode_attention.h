#ifndef VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_H_
#define VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_H_

// fused decode attention (one query token per sequence) over paged kv pages in the formats of
// docs/kv_formats.md plus each sequence's fp16 residual ring. every codec's kernel takes the
// same metadata (block tables, lengths, ring slots) in one plain struct with explicit strides.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/kv_page_format.h"

namespace vqserve::cuda {

using ::vqserve::KvPageFormat;

// the most split-kv partitions one launch uses (the workspace is sized for this many).
inline constexpr int kMaxDecodeSplits = 32;

struct DecodeAttentionParams {
  // queries (batch, num_heads, head_dim) fp32 after rope: element (b, h, i) at
  // q[b * q_batch_stride + h * q_head_stride + i].
  const float* q = nullptr;
  // vecinfer only: transformed queries H_D (q * lambda), same layout and strides as q.
  const float* q_tilde = nullptr;
  int64_t q_batch_stride = 0;
  int64_t q_head_stride = 0;
  // output (batch, num_heads, head_dim) fp32: element (b, h, i) at out[b * out_batch_stride +
  // h * out_head_stride + i].
  float* out = nullptr;
  int64_t out_batch_stride = 0;
  int64_t out_head_stride = 0;
  int batch = 0;
  int num_heads = 0;     // query heads, a multiple of num_kv_heads
  int num_kv_heads = 0;
  int head_dim = 0;      // 64 or 128
  float scale = 0.0f;    // softmax scale, 1/sqrt(head_dim)

  // coded pages: layer slice of page id j starts at pages + j * page_stride + layer_offset.
  const uint8_t* pages = nullptr;
  int64_t page_stride = 0;
  int64_t layer_offset = 0;
  int page_tokens = 32;                   // must be 32
  const int32_t* block_tables = nullptr;  // (batch, block_table_stride) page ids, logical order
  int64_t block_table_stride = 0;
  const int32_t* coded_lens = nullptr;    // (batch) tokens in pages: positions 0 .. n-1
  int max_coded_len = 0;                  // host-side bound on coded_lens (picks the splits)

  // fp16 residual ring (bits as uint16): residual token i of sequence b (position
  // coded_lens[b] + i) is element (slots[b], (coded_lens[b] + i) % res_ring_tokens, kv head, dim)
  // at res_k[slot * res_slot_stride + index * res_token_stride + head * res_head_stride + dim].
  const uint16_t* res_k = nullptr;
  const uint16_t* res_v = nullptr;
  int64_t res_slot_stride = 0;
  int64_t res_token_stride = 0;
  int64_t res_head_stride = 0;
  int res_ring_tokens = 1;
  const int32_t* slots = nullptr;     // (batch) ring slot of each sequence
  const int32_t* res_lens = nullptr;  // (batch) tokens in the ring; null means none

  // kivi: bits per code (2 or 4).
  int kivi_bits = 2;
  // vecinfer: this layer's centroids, k (D / vq_k_sub_dim, 256, vq_k_sub_dim) and
  // v (D / vq_v_sub_dim, 256, vq_v_sub_dim) fp32; kv head h's at + h * vq_codebook_head_stride
  // floats (0 when shared by all heads).
  const float* vq_k_codebook = nullptr;
  const float* vq_v_codebook = nullptr;
  int64_t vq_k_codebook_head_stride = 0;
  int64_t vq_v_codebook_head_stride = 0;
  int vq_k_sub_dim = 4;  // 2, 4 or 8
  int vq_v_sub_dim = 4;
  // vecinfer, optional (null: the kernels convert the fp32 books above themselves): fp16 copies
  // of those books (kernels/cuda/common/vecinfer_half_books.h), code-major (256, D / 4, 4): entry
  // (code, m) of book h at + h * vq_{k,v}_codebook_head_stride + (code * D / 4 + m) * 4 halves
  // (the fp32 books' head strides, in elements), bits = __float2half_rn of the fp32 centroid.
  // only the tensor-core kernel (vecinfer_mma_decode.cu) reads them: the values
  // one is a plain copy of what it builds itself (results bitwise unchanged); the keys one
  // rounds Ck to fp16 before the lut product q . Ck (lut entries may move by one fp16 ulp:
  // results within ~1e-5, not bitwise; needs the values one too).
  const uint16_t* vq_v_codebook_f16 = nullptr;
  const uint16_t* vq_k_codebook_f16 = nullptr;
  // vecinfer -pca keys (runtime/kv/vecinfer_codec.h), null otherwise: the key sub-vector sizes
  // (Mk = VecInferKeyCodes per kv head, at + h * Mk), summing to D; key book m of kv
  // head h is (256, vq_k_dims[m]) at vq_k_codebook + h * vq_k_codebook_head_stride + 256 * (the
  // sizes before m), centroids in the transformed space plus the transformed key mean, and
  // q_tilde is T^-1 q (so q_tilde . centroid = q . the decoded key). the launch fills the lut
  // scratch vq_pca_lut (VecInferPcaLutBytes) first; the tensor-core kernel's shapes only.
  const int32_t* vq_k_dims = nullptr;
  void* vq_pca_lut = nullptr;
  // key codes a token and kv head: 0 means D / vq_k_sub_dim. -pca keys may have any whole
  // number: the tensor-core kernel takes D / 4, D / 8, or 17 to 32 at head_dim 64, 33 to 40 at
  // 128 (with vq_k_sub_dim 4 and 4-dim values: vecinfer-k2.375v2-pca's 19 or 38).
  int vq_k_codes = 0;
  // vecinfer code widths, 8 or 12 bits (2^bits centroids per codebook instead of 256 above).
  // 12-bit codes, and 8-bit sub-vector pairs other than (2,2) (4,4) (8,8) (4,8), run the
  // element-wise kernel that reads centroids from global memory (vecinfer_generic_decode.cu).
  int vq_k_code_bits = 8;
  int vq_v_code_bits = 8;
  // commvq: key rounds R and value rounds Rv of the page layout, and the rope base. the books
  // come through vq_k_codebook / vq_v_codebook: keys (R' >= R rounds, 64 entries, head_dim / 2
  // pairs, 2 = x, y) and values (Rv' >= Rv rounds, head_dim / 8 sub-vectors, 256, 8) fp32 of
  // this layer, kv head h's at + h * vq_{k,v}_codebook_head_stride floats (the layout of
  // runtime/kv/commvq_codebooks.h). q is the query after rope; q_tilde is unused.
  int commvq_key_rounds = 0;
  int commvq_value_rounds = 0;
  float rope_theta = 10000.0f;
  // split-kv scratch of DecodeWorkspaceFloats() floats in device memory.
  float* workspace = nullptr;
  int num_splits = 0;  // 0 chooses; otherwise 1 .. kMaxDecodeSplits

  // attention sink (null sink_lens: none): the first sink_lens[b] positions of sequence b in
  // fp16, token t at sink_k[slots[b] * sink_slot_stride + t * res_token_stride +
  // head * res_head_stride + dim] (likewise sink_v), folded with the residual ring. the coded
  // pages then hold positions sink_lens[b] .. sink_lens[b] + coded_lens[b] - 1: block_tables
  // row b starts at the page of position sink_lens[b] (sink pages are page-aligned), and the
  // ring's first token is position sink_lens[b] + coded_lens[b].
  const int32_t* sink_lens = nullptr;
  const uint16_t* sink_k = nullptr;
  const uint16_t* sink_v = nullptr;
  int64_t sink_slot_stride = 0;
};

// key codes a token and kv head of vecinfer pages: p.vq_k_codes, or D / vq_k_sub_dim when 0.
inline int VecInferKeyCodes(const DecodeAttentionParams& p) {
  return p.vq_k_codes > 0 ? p.vq_k_codes : p.head_dim / p.vq_k_sub_dim;
}

// the key-code counts the tensor-core kernel takes at run time (besides D / 4 and D / 8), with
// -pca keys and 4-dim values: 17 to 32 at head_dim 64, 33 to 40 at 128 (PageShape's kMaxKCodes).
constexpr bool VecInferMmaTakesKeyCodes(int head_dim, int k_codes) {
  return (head_dim == 64 || head_dim == 128) && k_codes > head_dim / 4 &&
         k_codes <= (head_dim == 64 ? 32 : 40);
}
// p's -pca keys are such a count: vq_k_sub_dim 4 (its stand-in), 8-bit codes, 4-dim values.
inline bool VecInferMmaVarKeyCodes(const DecodeAttentionParams& p) {
  return p.vq_k_dims != nullptr && p.vq_k_sub_dim == 4 && p.vq_v_sub_dim == 4 && p.vq_k_code_bits == 8 &&
         p.vq_v_code_bits == 8 && VecInferMmaTakesKeyCodes(p.head_dim, VecInferKeyCodes(p));
}

// bytes of the -pca lut scratch (DecodeAttentionParams::vq_pca_lut) for `k_codes` key codes a
// token: one fp16 lut of 256 codes x VecInferPcaLutRow(k_codes) entries x 4 heads per block, at
// most num_heads blocks a sequence.
size_t VecInferPcaLutBytes(int batch, int num_heads, int k_codes);
// entries of a -pca lut row: the key codes rounded up to 4 (the entries past k_codes are zeros).
constexpr int VecInferPcaLutRow(int k_codes) { return (k_codes + 3) / 4 * 4; }

// floats of scratch one launch needs.
size_t DecodeWorkspaceFloats(int batch, int num_heads, int head_dim);

// launches decode attention over coded pages + residual ring, then the split combine.
// returns an empty string on success, else what was wrong (unsupported shape, cuda error).
std::string LaunchDecodeAttention(KvPageFormat format, const DecodeAttentionParams& params,
                                  cudaStream_t stream);

// the split count LaunchDecodeAttention picks for these params (num_splits == 0).
int ChooseDecodeSplits(KvPageFormat format, const DecodeAttentionParams& params);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_H_
