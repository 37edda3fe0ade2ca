#include "server/civet_thread_stack.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cstddef>

namespace {

constexpr size_t kMinThreadStack = size_t{1} << 20;

using SetStackSizeFn = int (*)(pthread_attr_t*, size_t);

}  // namespace

// the process-wide definition: civetweb's calls resolve here, then to glibc's.
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  static const SetStackSizeFn real =
      reinterpret_cast<SetStackSizeFn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real(attr, size < kMinThreadStack ? kMinThreadStack : size);
}

namespace vqserve {

bool CivetThreadStackFloorLinked() { return true; }

}  // namespace vqserve
