#include "runtime/kv/paged_kv_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

thread_local PagedKvCache::StepWindow PagedKvCache::window_;

std::shared_ptr<KvMemory> MakeHostKvMemory(size_t bytes) {
  auto m = std::make_shared<KvMemory>();
  std::shared_ptr<uint8_t[]> data(new uint8_t[bytes > 0 ? bytes : 1]);
  m->base = data.get();
  m->bytes = bytes;
  m->device = KvDevice::kHost;
  m->owner = std::shared_ptr<void>(data, data.get());
  return m;
}

void PagedKvCache::InitSpec(int sink_tokens) {
  const KvShape& s = codec_->shape();
  spec_.codec = codec_->name();
  spec_.page_tokens = codec_->page_tokens();
  spec_.residual_tokens = codec_->residual_tokens();
  spec_.needs_pre_rope_keys = codec_->needs_pre_rope_keys();
  spec_.sink_tokens = spec_.residual_tokens > 0
                          ? std::max(0, sink_tokens) / spec_.page_tokens * spec_.page_tokens
                          : 0;
  ring_tokens_ = spec_.residual_tokens + spec_.page_tokens;
  ring_arrays_ = spec_.needs_pre_rope_keys ? 3 : 2;
  layer_ring_elems_ =
      static_cast<size_t>(ring_arrays_) * ring_tokens_ * s.num_kv_heads * s.head_dim;
  spec_.page_bytes = codec_->LayerPageBytes() * s.num_layers;
  const size_t layer_sink_elems = size_t{2} * spec_.sink_tokens * s.num_kv_heads * s.head_dim;
  spec_.slot_bytes = (layer_ring_elems_ + layer_sink_elems) * sizeof(uint16_t) * s.num_layers;
  spec_.fixed_bytes = codec_->FixedBytes();
  spec_.bytes_per_token = static_cast<double>(spec_.page_bytes) / spec_.page_tokens;
}

PagedKvCache::PagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages, int num_slots,
                           int sink_tokens)
    : codec_(std::move(codec)), num_pages_(num_pages), num_slots_(num_slots) {
  InitSpec(sink_tokens);
  own_pages_.reset(new uint8_t[std::max<size_t>(1, spec_.page_bytes * num_pages_)]);
  own_slots_.reset(new uint8_t[std::max<size_t>(1, spec_.slot_bytes * num_slots_)]);
  pages_ = own_pages_.get();
  slots_ = own_slots_.get();
}

PagedKvCache::PagedKvCache(std::unique_ptr<KvCodec> codec, std::shared_ptr<const KvMemory> memory,
                           int sink_tokens)
    : codec_(std::move(codec)), memory_(std::move(memory)) {
  Check(memory_ != nullptr && memory_->device == KvDevice::kHost, "host memory needed");
  InitSpec(sink_tokens);
  num_pages_ = static_cast<int>(memory_->bytes / spec_.page_bytes);
  num_slots_ = static_cast<int>(memory_->bytes / spec_.slot_bytes);
  pages_ = memory_->base;
  slots_ = memory_->base;
}

size_t PagedKvCache::total_bytes() const {
  return page_memory_bytes() + slot_memory_bytes() + spec_.fixed_bytes;
}

const uint8_t* PagedKvCache::page_slice(int page_id, int layer) const {
  return pages_ + spec_.page_bytes * page_id + codec_->LayerPageBytes() * layer;
}

uint16_t* PagedKvCache::Ring(int slot, int layer, int which) {
  const size_t array_elems = layer_ring_elems_ / ring_arrays_;
  uint16_t* base = reinterpret_cast<uint16_t*>(slots_ + spec_.slot_bytes * slot);
  return base + layer_ring_elems_ * layer + array_elems * which;
}

uint16_t* PagedKvCache::Sink(int slot, int layer, int which) {
  const size_t rows =
      static_cast<size_t>(spec_.sink_tokens) * shape().num_kv_heads * shape().head_dim;
  uint16_t* base = reinterpret_cast<uint16_t*>(slots_ + spec_.slot_bytes * slot);
  return base + layer_ring_elems_ * shape().num_layers + rows * (2 * layer + which);
}

void PagedKvCache::FlushPage(int layer, const KvSeqRef& seq, int first_pos) {
  const KvShape& s = shape();
  const int p = spec_.page_tokens;
  const int row = s.num_kv_heads * s.head_dim;
  if (first_pos < spec_.sink_tokens) return;  // the sink stays fp16; its page is never read
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
  uint8_t* dst = pages_ + spec_.page_bytes * page_id + codec_->LayerPageBytes() * layer;
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
  // the fp16 tokens the step's queries attend, [CodedTokens(num_cached + 1), num_cached + n),
  // as fp32: older ones from the ring before this step overwrites them, new ones rounded.
  StepWindow& w = window_;
  w.owner = this;
  w.slot = seq.slot;
  w.layer = layer;
  w.first = std::min(CodedTokens(spec_, seq.num_cached + 1), seq.num_cached);
  w.end = seq.num_cached + n;
  const size_t window_elems = static_cast<size_t>(w.end - w.first) * row;
  w.k.resize(window_elems);
  w.v.resize(window_elems);
  for (int pos = w.first; pos < seq.num_cached; ++pos) {
    const long r = static_cast<long>(pos % ring_tokens_) * row;
    const long d = static_cast<long>(pos - w.first) * row;
    cpu::HalfToFloatRow(kr + r, w.k.data() + d, row);
    cpu::HalfToFloatRow(vr + r, w.v.data() + d, row);
  }
  for (int i = 0; i < n; ++i) {
    const int pos = seq.num_cached + i;
    const long r = static_cast<long>(pos % ring_tokens_) * row;
    const long src = static_cast<long>(i) * row;
    cpu::FloatToHalfRow(k_rope + src, kr + r, row);
    cpu::FloatToHalfRow(v + src, vr + r, row);
    if (pr) cpu::FloatToHalfRow(k_pre_rope + src, pr + r, row);
    if (pos < spec_.sink_tokens) {
      std::copy_n(kr + r, row, Sink(seq.slot, layer, 0) + static_cast<long>(pos) * row);
      std::copy_n(vr + r, row, Sink(seq.slot, layer, 1) + static_cast<long>(pos) * row);
    }
    const long d = static_cast<long>(pos - w.first) * row;
    cpu::HalfToFloatRow(kr + r, w.k.data() + d, row);
    cpu::HalfToFloatRow(vr + r, w.v.data() + d, row);
    const int before = CodedTokens(spec_, pos);
    if (CodedTokens(spec_, pos + 1) > before) FlushPage(layer, seq, before);
  }
}

void PagedKvCache::Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) {
  const KvShape& s = shape();
  const int total = seq.num_cached + n;
  const int coded = CodedTokens(spec_, total);
  const int p = spec_.page_tokens;
  StepWindow& w = window_;
  Check(w.owner == this && w.slot == seq.slot && w.layer == layer && w.end == total &&
            w.first <= CodedTokens(spec_, seq.num_cached + 1),
        "Attend must follow the Append of the same step on the same thread");
  Check(coded / p <= seq.num_blocks, "block table shorter than the coded tokens need");
  // this layer's page slices in logical order.
  std::vector<const uint8_t*> pages(coded / p);
  for (int j = 0; j < coded / p; ++j) {
    Check(seq.block_table[j] >= 0 && seq.block_table[j] < num_pages_, "page id out of range");
    pages[j] = page_slice(seq.block_table[j], layer);
  }
  const int row = s.num_kv_heads * s.head_dim;
  const int qrow = s.num_heads * s.head_dim;
  // the sink tokens as fp32 (only those already coded are read from here).
  const int sink = std::min(spec_.sink_tokens, coded);
  std::vector<float> sink_k(static_cast<size_t>(sink) * row), sink_v(sink_k.size());
  cpu::HalfToFloatRow(Sink(seq.slot, layer, 0), sink_k.data(), sink_k.size());
  cpu::HalfToFloatRow(Sink(seq.slot, layer, 1), sink_v.data(), sink_v.size());
#pragma omp parallel for schedule(dynamic, 4) if (n > 1)
  for (int i = 0; i < n; ++i) {
    thread_local std::vector<float> buf;
    buf.assign(static_cast<size_t>(s.num_heads) * (2 + s.head_dim), 0.0f);
    SoftmaxState state{buf.data(), buf.data() + s.num_heads, buf.data() + 2 * s.num_heads};
    std::fill(state.m, state.m + s.num_heads, -std::numeric_limits<float>::infinity());
    const int q_pos = seq.num_cached + i;
    const float* qi = q + static_cast<long>(i) * qrow;
    // what a query at q_pos would see had the tokens been decoded one at a time: codes below
    // CodedTokens(q_pos + 1), fp16 from there to q_pos.
    const int in_pages = CodedTokens(spec_, q_pos + 1);
    const int in_sink = std::min(sink, in_pages);
    if (in_sink > 0) AttendDense(s, qi, sink_k.data(), sink_v.data(), in_sink, &state);
    if (in_pages > in_sink) {
      codec_->AttendPagesFrom(layer, pages.data() + in_sink / p, in_sink, in_pages - in_sink, qi,
                              q_pos, &state);
    }
    const long off = static_cast<long>(in_pages - w.first) * row;
    AttendDense(s, qi, w.k.data() + off, w.v.data() + off, q_pos + 1 - in_pages, &state);
    FinishSoftmax(s, state, out + static_cast<long>(i) * qrow);
  }
}

void PagedKvCache::CopySlot(int from, int to) {
  Check(from >= 0 && from < num_slots_ && to >= 0 && to < num_slots_, "slot out of range");
  if (from == to) return;
  std::memcpy(slots_ + spec_.slot_bytes * to, slots_ + spec_.slot_bytes * from, spec_.slot_bytes);
}

std::unique_ptr<PagedKvCache> MakePagedKvCache(std::unique_ptr<KvCodec> codec, int num_pages,
                                               int num_slots, int sink_tokens) {
  return std::make_unique<PagedKvCache>(std::move(codec), num_pages, num_slots, sink_tokens);
}

std::unique_ptr<PagedKvCache> MakePagedKvCache(std::unique_ptr<KvCodec> codec,
                                               std::shared_ptr<const KvMemory> memory,
                                               int sink_tokens) {
  return std::make_unique<PagedKvCache>(std::move(codec), std::move(memory), sink_tokens);
}

}  // namespace vqserve
