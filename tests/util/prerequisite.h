#ifndef VQSERVE_TESTS_UTIL_PREREQUISITE_H_
#define VQSERVE_TESTS_UTIL_PREREQUISITE_H_

// a missing prerequisite that scripts/setup provides (the default model, the fortunes text,
// promtool, prometheus, a tracked fixture): the test is skipped on a developer's machine and
// fails under CI (environment variable CI set), where setup must have provided it. stream the
// reason: VQ_SKIP_UNLESS_CI << "promtool not installed";

#include <cstdlib>

#include <gtest/gtest.h>

#define VQ_SKIP_UNLESS_CI                                                                  \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__, "",                                         \
                           std::getenv("CI") != nullptr                                    \
                               ? ::testing::TestPartResult::kFatalFailure                  \
                               : ::testing::TestPartResult::kSkip)                         \
         << (std::getenv("CI") != nullptr ? "missing under CI (scripts/setup provides it): " \
                                          : "")

#endif  // VQSERVE_TESTS_UTIL_PREREQUISITE_H_
