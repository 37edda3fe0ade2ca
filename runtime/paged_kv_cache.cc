#include "runtime/paged_kv_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "kernels/cpu/half_convert.h"

namespace vqserve {
namespace {

// aborts with a message when a caller breaks the cache's contract (a programming error).
void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "PagedKvCache: %s\n", what);
    std::abort();
  }
}

}  // namespace

PagedKvCache::PagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages, int num_slots)
    : codec_(std::move(codec)), num_pages_(num_pages), num_slots_(num_slots) {
  const KvShape& s = codec_->shape();
  spec_.codec = codec_->name();
  spec_.page_tokens = codec_->page_tokens();
  spec_.residual_tokens = codec_->residual_tokens();
  spec_.needs_pre_rope_keys = codec_->needs_pre_rope_keys();
  ring_tokens_ = spec_.residual_tokens + spec_.page_tokens;
  ring_arrays_ = spec_.needs_pre_rope_keys ? 3 : 2;
  layer_ring_elems_ =
      static_cast<size_t>(ring_arrays_) * ring_tokens_ * s.num_kv_heads * s.head_dim;
  spec_.page_bytes = codec_->LayerPageBytes() * s.num_layers;
  spec_.slot_bytes = layer_ring_elems_ * sizeof(uint16_t) * s.num_layers;
  spec_.fixed_bytes = codec_->FixedBytes();
  spec_.bytes_per_token = static_cast<double>(spec_.page_bytes) / spec_.page_tokens;
  pages_.reset(new uint8_t[spec_.page_bytes * num_pages_]);
  rings_.reset(new uint16_t[layer_ring_elems_ * s.num_layers * num_slots_]);
}

size_t PagedKvCache::total_bytes() const {
  return page_memory_bytes() + slot_memory_bytes() + spec_.fixed_bytes;
}

const uint8_t* PagedKvCache::page_slice(int page_id, int layer) const {
  return pages_.get() + spec_.page_bytes * page_id + codec_->LayerPageBytes() * layer;
}

uint16_t* PagedKvCache::Ring(int slot, int layer, int which) {
  const size_t array_elems = layer_ring_elems_ / ring_arrays_;
  return rings_.get() + layer_ring_elems_ * (static_cast<size_t>(slot) * shape().num_layers +
                                             layer) +
         array_elems * which;
}

void PagedKvCache::FlushPage(int layer, const KvSeqRef& seq, int first_pos) {
  const KvShape& s = shape();
  const int p = spec_.page_tokens;
  const int row = s.num_kv_heads * s.head_dim;
  const int block = first_pos / p;
  Check(block < seq.num_blocks, "block table shorter than the coded tokens need");
  const int page_id = seq.block_table[block];
  Check(page_id >= 0 && page_id < num_pages_, "page id out of range");
  thread_local std::vector<float> k, v;
  k.resize(static_cast<size_t>(p) * row);
  v.resize(static_cast<size_t>(p) * row);
  const uint16_t* kr = Ring(seq.slot, layer, spec_.needs_pre_rope_keys ? 2 : 0);
  const uint16_t* vr = Ring(seq.slot, layer, 1);
  for (int t = 0; t < p; ++t) {
    const long r = static_cast<long>((first_pos + t) % ring_tokens_) * row;
    cpu::HalfToFloatRow(kr + r, k.data() + static_cast<long>(t) * row, row);
    cpu::HalfToFloatRow(vr + r, v.data() + static_cast<long>(t) * row, row);
  }
  uint8_t* dst = pages_.get() + spec_.page_bytes * page_id + codec_->LayerPageBytes() * layer;
  codec_->EncodePage(layer, first_pos, k.data(), v.data(), dst);
}

void PagedKvCache::Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
                          const float* k_rope, const float* v) {
  Check(seq.slot >= 0 && seq.slot < num_slots_, "slot out of range");
  Check(!spec_.needs_pre_rope_keys || k_pre_rope != nullptr, "codec needs pre-rope keys");
  const KvShape& s = shape();
  const int row = s.num_kv_heads * s.head_dim;
  uint16_t* kr = Ring(seq.slot, layer, 0);
  uint16_t* vr = Ring(seq.slot, layer, 1);
  uint16_t* pr = spec_.needs_pre_rope_keys ? Ring(seq.slot, layer, 2) : nullptr;
  for (int i = 0; i < n; ++i) {
    const int pos = seq.num_cached + i;
    const long r = static_cast<long>(pos % ring_tokens_) * row;
    const long src = static_cast<long>(i) * row;
    cpu::FloatToHalfRow(k_rope + src, kr + r, row);
    cpu::FloatToHalfRow(v + src, vr + r, row);
    if (pr) cpu::FloatToHalfRow(k_pre_rope + src, pr + r, row);
    const int before = CodedTokens(spec_, pos);
    if (CodedTokens(spec_, pos + 1) > before) FlushPage(layer, seq, before);
  }
}

void PagedKvCache::Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) {
  const KvShape& s = shape();
  const int row = s.num_kv_heads * s.head_dim;
  const int total = seq.num_cached + n;
  const int coded = CodedTokens(spec_, total);
  const int p = spec_.page_tokens;
  Check(coded / p <= seq.num_blocks, "block table shorter than the coded tokens need");
  // this layer's page slices in logical order.
  std::vector<const uint8_t*> pages(coded / p);
  for (int j = 0; j < coded / p; ++j) {
    Check(seq.block_table[j] >= 0 && seq.block_table[j] < num_pages_, "page id out of range");
    pages[j] = page_slice(seq.block_table[j], layer);
  }
  // ring tokens [coded, total) as fp32 in position order.
  const int dense = total - coded;
  std::vector<float> kd(static_cast<size_t>(dense) * row), vd(static_cast<size_t>(dense) * row);
  const uint16_t* kr = Ring(seq.slot, layer, 0);
  const uint16_t* vr = Ring(seq.slot, layer, 1);
  for (int t = 0; t < dense; ++t) {
    const long r = static_cast<long>((coded + t) % ring_tokens_) * row;
    cpu::HalfToFloatRow(kr + r, kd.data() + static_cast<long>(t) * row, row);
    cpu::HalfToFloatRow(vr + r, vd.data() + static_cast<long>(t) * row, row);
  }
  const int qrow = s.num_heads * s.head_dim;
#pragma omp parallel for schedule(dynamic, 4) if (n > 1)
  for (int i = 0; i < n; ++i) {
    thread_local std::vector<float> buf;
    buf.assign(static_cast<size_t>(s.num_heads) * (2 + s.head_dim), 0.0f);
    SoftmaxState state{buf.data(), buf.data() + s.num_heads, buf.data() + 2 * s.num_heads};
    std::fill(state.m, state.m + s.num_heads, -std::numeric_limits<float>::infinity());
    const int q_pos = seq.num_cached + i;
    const float* qi = q + static_cast<long>(i) * qrow;
    const int in_pages = std::min(coded, q_pos + 1);
    if (in_pages > 0) codec_->AttendPages(layer, pages.data(), in_pages, qi, q_pos, &state);
    const int in_ring = q_pos + 1 - coded;
    if (in_ring > 0) AttendDense(s, qi, kd.data(), vd.data(), in_ring, &state);
    FinishSoftmax(s, state, out + static_cast<long>(i) * qrow);
  }
}

std::unique_ptr<PagedKvCache> MakePagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages,
                                               int num_slots) {
  return std::make_unique<PagedKvCache>(std::move(codec), num_pages, num_slots);
}

}  // namespace vqserve
