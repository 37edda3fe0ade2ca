// stop strings never reach the client, even when split across tokens.
#include "server/stop_checker.h"

#include <gtest/gtest.h>

namespace vqserve {
namespace {

// feeds `pieces` one at a time; returns the streamed text and whether a stop matched.
std::pair<std::string, bool> Feed(std::vector<std::string> stops,
                                  const std::vector<std::string>& pieces) {
  StopChecker c(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    bool matched = false;
    out += c.Add(p, &matched);
    if (matched) return {out, true};
  }
  return {out + c.Flush(), false};
}

TEST(StopCheckerTest, MatchSplitAcrossPiecesIsNotStreamed) {
  auto [out, matched] = Feed({"END"}, {"hello E", "N", "D and more"});
  EXPECT_TRUE(matched);
  EXPECT_EQ(out, "hello ");
}

TEST(StopCheckerTest, FalseStartIsReleased) {
  auto [out, matched] = Feed({"END"}, {"an E", "Nx", " done"});
  EXPECT_FALSE(matched);
  EXPECT_EQ(out, "an ENx done");
}

TEST(StopCheckerTest, EarliestOfSeveralStopsWins) {
  auto [out, matched] = Feed({"world", "lo w"}, {"hello world"});
  EXPECT_TRUE(matched);
  EXPECT_EQ(out, "hel");
}

TEST(StopCheckerTest, HoldsBackOnlyPossiblePrefixes) {
  StopChecker c({"\n\n"});
  bool matched = false;
  EXPECT_EQ(c.Add("a\n", &matched), "a");
  EXPECT_EQ(c.Add("b", &matched), "\nb");
  EXPECT_FALSE(matched);
}

TEST(StopCheckerTest, MultibyteStop) {
  auto [out, matched] = Feed({"é!"}, {"caf", "é", "!"});
  EXPECT_TRUE(matched);
  EXPECT_EQ(out, "caf");
}

}  // namespace
}  // namespace vqserve
