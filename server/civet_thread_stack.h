// civetweb (as Debian builds it) starts its threads with 100 KB stacks. glibc carves every
// thread's static TLS out of its stack, and the CUDA libraries the vqserve binary loads at start
// hold more than that (cuBLASLt alone ~94 KB), so pthread_create fails with EINVAL and the
// metrics server cannot start. this file interposes pthread_attr_setstacksize for the whole
// process: a requested stack below 1 MiB becomes 1 MiB (address space only; pages are touched
// on use). linking it needs one reference from code that starts civetweb.
#ifndef VQSERVE_SERVER_CIVET_THREAD_STACK_H_
#define VQSERVE_SERVER_CIVET_THREAD_STACK_H_

namespace vqserve {

// true; calling it keeps the interposer in the link.
bool CivetThreadStackFloorLinked();

}  // namespace vqserve

#endif  // VQSERVE_SERVER_CIVET_THREAD_STACK_H_
