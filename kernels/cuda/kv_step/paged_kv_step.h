#ifndef VQSERVE_KERNELS_CUDA_KV_STEP_PAGED_KV_STEP_H_
#define VQSERVE_KERNELS_CUDA_KV_STEP_PAGED_KV_STEP_H_

// one forward step's view of an fp16 paged kv cache in device memory, for one layer: where the
// pages and residual rings are, and which sequence and position each new token has. the page
// format is "fp16" of docs/kv_formats.md (K[H][P][D] then V[H][P][D] fp16 per layer slice); the
// ring is (slot, ring_tokens, H, D) fp16 for k (after rope) and for v.

#include <cstdint>

namespace vqserve::cuda {

struct PagedKvStep {
  // new tokens of the step, all sequences concatenated: token t belongs to sequence tok_seq[t]
  // and sits at position tok_pos[t].
  int num_tokens = 0;
  const int32_t* tok_seq = nullptr;
  const int32_t* tok_pos = nullptr;
  // multi-token steps: (num_q_tiles, 2) query tiles of prefill_tiles.h (first step token,
  // count) for the tensor-core prefill kernel; null: the reference kernels.
  const int32_t* q_tiles = nullptr;
  int num_q_tiles = 0;
  // with q_tiles, the tensor-core kernel may split each tile's keys (flash-decoding style,
  // merged by a log-sum-exp pass) to fill the sms: max_seq_len is the longest sequence after the
  // step (host value), prefill_work prefill_work_floats floats of scratch for the partials (null:
  // no splits), prefill_splits 0 to let the launcher choose, else the count wanted (tests).
  int max_seq_len = 0;
  float* prefill_work = nullptr;
  int64_t prefill_work_floats = 0;
  int prefill_splits = 0;

  // per sequence (batch): ring slot, tokens cached before the step, coded tokens before and
  // after the step (CodedTokens() of num_cached and of num_cached + new tokens).
  int batch = 0;
  const int32_t* slots = nullptr;
  const int32_t* num_cached = nullptr;
  const int32_t* coded_before = nullptr;
  const int32_t* coded_after = nullptr;
  const int32_t* block_tables = nullptr;  // (batch, block_table_stride) page ids, logical order
  int64_t block_table_stride = 0;

  // layer slice of page id j starts at pages + j * page_stride + layer_offset.
  uint8_t* pages = nullptr;
  int64_t page_stride = 0;
  int64_t layer_offset = 0;
  int page_tokens = 32;
  // this layer's rings: token index i of slot s at ring_k + s * ring_slot_stride + i * H * D.
  uint16_t* ring_k = nullptr;
  uint16_t* ring_v = nullptr;
  int64_t ring_slot_stride = 0;
  int ring_tokens = 32;

  int num_kv_heads = 0;
  int head_dim = 0;

  // attention sink (codecs with a residual ring): positions below sink_tokens of slot s stay
  // fp16 for the sequence's life at sink_k + s * sink_slot_stride + pos * H * D (likewise v);
  // their pages are never encoded. sink_tokens 0: none.
  uint16_t* sink_k = nullptr;
  uint16_t* sink_v = nullptr;
  int64_t sink_slot_stride = 0;
  int sink_tokens = 0;
};

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_KV_STEP_PAGED_KV_STEP_H_
