#ifndef VQSERVE_SCHEDULER_CHECK_H_
#define VQSERVE_SCHEDULER_CHECK_H_

#include <cstdio>
#include <cstdlib>

// aborts with file, line and the failed condition when a scheduler invariant breaks; these are
// programming errors (a stale plan, a foreign page), never bad requests.
#define VQ_SCHED_CHECK(cond)                                                       \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "%s:%d: scheduler check failed: %s\n", __FILE__,        \
                   __LINE__, #cond);                                               \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

#endif  // VQSERVE_SCHEDULER_CHECK_H_
