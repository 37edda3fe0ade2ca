// the per-request buffer coalesces what a slow reader has not taken and never blocks the pusher.
#include "server/request_stream.h"

#include <gtest/gtest.h>

namespace vqserve {
namespace {

v1::GenerateResponse Delta(int32_t id, const std::string& text) {
  v1::GenerateResponse d;
  d.add_token_ids(id);
  d.set_text(text);
  return d;
}

TEST(RequestStreamTest, PendingDeltasCoalesceIntoOneMessage) {
  RequestStream s(7, "r7");
  int notified = 0;
  s.SetListener([&] { ++notified; });
  for (int i = 0; i < 100; ++i) s.Push(Delta(i, "x"));
  EXPECT_EQ(notified, 100);
  v1::GenerateResponse msg;
  absl::Status st;
  ASSERT_EQ(s.TakeNext(&msg, &st), RequestStream::Take::kMessage);
  EXPECT_EQ(msg.token_ids_size(), 100);
  EXPECT_EQ(msg.text(), std::string(100, 'x'));
  EXPECT_EQ(msg.request_id(), "r7");
  EXPECT_EQ(s.coalesced(), 99);
  EXPECT_EQ(s.TakeNext(&msg, &st), RequestStream::Take::kNone);
}

TEST(RequestStreamTest, FinishRidesOnPendingOutputThenDone) {
  RequestStream s(1, "r");
  s.Push(Delta(5, "a"));
  v1::Usage u;
  u.set_completion_tokens(1);
  s.Finish(v1::FINISH_REASON_LENGTH, u);
  s.Push(Delta(6, "b"));  // ignored after the end
  v1::GenerateResponse msg;
  absl::Status st;
  ASSERT_EQ(s.TakeNext(&msg, &st), RequestStream::Take::kMessage);
  EXPECT_EQ(msg.token_ids_size(), 1);
  EXPECT_EQ(msg.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(msg.usage().completion_tokens(), 1);
  ASSERT_EQ(s.TakeNext(&msg, &st), RequestStream::Take::kDone);
  EXPECT_TRUE(st.ok());
}

TEST(RequestStreamTest, FailDropsOutputAndCarriesStatus) {
  RequestStream s(1, "r");
  s.Push(Delta(5, "a"));
  s.Fail(absl::ResourceExhaustedError("full"));
  v1::GenerateResponse msg;
  absl::Status st;
  ASSERT_EQ(s.TakeNext(&msg, &st), RequestStream::Take::kDone);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace vqserve
