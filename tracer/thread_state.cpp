// thread_state(): see thread_state.h.
//
// Out of line, like the other accessors of thread_locals: an inlined one is computed again at
// each use rather than kept in a register; a reference returned by a call is kept.
//
// This file alone is compiled with TLS descriptors (-mtls-dialect=gnu2, tracer/CMakeLists.txt).
// With the default dialect, the address of a thread_local in a shared library is a call of
// __tls_get_addr (~20 instructions, ~3 ns) at every CUDA callback. With descriptors, a library
// whose thread_locals sit in the static TLS block (LD_PRELOAD, or loaded at start-up) gets the
// address from a two-instruction resolver; one loaded later (CUDA_INJECTION64_PATH) from the
// dynamic resolver, the same work as before. Only this one function uses them: it holds no value
// across the access, so a resolver that fails to preserve a register (glibc bug 31372, the
// dynamic resolver before 2.40) has nothing to clobber here.
#include "tracer/thread_state.h"

namespace streamrace::tracer {

__attribute__((noinline)) TracerThreadState& thread_state() {
  thread_local TracerThreadState state;
  return state;
}

}  // namespace streamrace::tracer
