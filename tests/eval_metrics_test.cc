// the eval command's passkey answer check (tools/vqserve/eval_metrics.h).
#include "tools/vqserve/eval_metrics.h"

#include <gtest/gtest.h>

namespace vqserve::cli {
namespace {

TEST(PasskeyAnswerTest, FirstRunOfDigitsMustBeTheKey) {
  EXPECT_TRUE(PasskeyAnswerCorrect(" 86806.", "86806"));
  EXPECT_TRUE(PasskeyAnswerCorrect(" 86806. Remember", "86806"));
  EXPECT_TRUE(PasskeyAnswerCorrect("The pass key is 66824", "66824"));
  // one digit too many or too few, or split, is a miss (a substring test would pass the first).
  EXPECT_FALSE(PasskeyAnswerCorrect(" 868066.", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect(" 8680.The", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect(" 8680 6", "86806"));
  // only the first number counts.
  EXPECT_FALSE(PasskeyAnswerCorrect(" 12 then 86806", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect(" the pass key that is hidden inside the", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect("", "86806"));
}

}  // namespace
}  // namespace vqserve::cli
