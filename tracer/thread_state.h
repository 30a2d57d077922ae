// Per-thread flags shared by the CUPTI callback, the NCCL interposer and the tracer's own
// threads: whether the thread is inside one of the tracer's own CUDA calls (ignore it),
// inside an NCCL entry point (NCCL's internal launches are not the user's), and inside a
// runtime API call (its driver calls are the same operation, counted once).
#pragma once

#include <cstddef>
#include <cstdint>

namespace streamrace::trace {
struct CallAccessEntry;
}

namespace streamrace::tracer {

struct RuntimeScope {
  uint32_t cbid = 0;
  uint32_t correlation = 0;
  uint32_t api_id = 0;
  bool per_thread_default = false;  // a _ptsz/_ptds entry point
  bool launch = false;              // a kernel launch whose driver launch carries the arguments
  bool launch_emitted = false;     // (or its graph kernel node)
  bool graph_kernel_node = false;  // adds or sets a kernel node: the driver call inside carries the CUfunction
  uint64_t stream = 0;  // launches: the stream as the runtime call named it, normalised
};

// A recorder's id and the calling thread's buffer in it (TraceRecorder::ThreadBuffer).
struct RecorderBufferRef {
  uint64_t recorder = 0;
  void* buf = nullptr;
};

// The fields a kernel launch reads come first, in the struct's first cache line: a line the
// launch need not touch is one the program's work between two launches may have evicted.
struct alignas(64) TracerThreadState {
  int internal = 0;       // > 0: calls made by the tracer itself
  int nccl_depth = 0;     // > 0: inside an NCCL entry point
  int runtime_depth = 0;  // > 0: inside a runtime call (runtime, below, is the outermost)
  // cuBLAS (tracer/cublas_interposer.cpp): the outermost call's byte ranges, attached to every
  // kernel the thread launches until the call returns (blas_accesses below).
  uint32_t blas_access_count = 0;
  uint64_t last_context = ~0ull;
  uint32_t last_device = 0;
  // Set (through GilScope, tracer/python_frames.h) around the calls whose Python stack matters.
  bool may_take_gil = false;
  // Precise mode (tracer/precise/): set by the Sanitizer session's launch callback, which
  // runs inside the launch call, and read when the handler writes that launch's record.
  uint64_t precise_correlation = 0;     // the launch with this correlation was patched
  const char* launch_function = nullptr;  // the kernel's (mangled) name, as the launch callback gave it
  // The thread's kernel-launch scratch (tracer/cuda_call_handler.cpp) and allocation lookup
  // cache (tracer/allocation_table.cpp), reached from here so that a launch looks up one
  // thread_local, not four: null until first used.
  void* launch_scratch = nullptr;
  void* allocation_cache = nullptr;
  // Second line: what a launch's stack and record read.
  // The thread's Python call-site cache (tracer/stack_capture.cpp): null until first used.
  void* python_sites = nullptr;
  // The thread's buffer in the recorder it wrote to last (tracer/trace_recorder.cpp).
  RecorderBufferRef recorder_buffer;
  uint64_t nccl_launch_correlation = 0;  // first kernel launch seen inside the NCCL call
  const trace::CallAccessEntry* blas_accesses = nullptr;
  int blas_depth = 0;
  RuntimeScope runtime;  // the outermost runtime call in progress
};
static_assert(offsetof(TracerThreadState, python_sites) == 64);  // the launch's fields: one line
static_assert(offsetof(TracerThreadState, blas_accesses) < 128);  // its stack's and record's: the next

TracerThreadState& thread_state();

// A per-thread object of type T whose address the thread state keeps in `slot`, so that the hot
// paths reach it without a thread_local of its own: made on first use, freed when the thread
// exits (the slot emptied). The thread state forgot it (a test resets the state) but the owner
// has it: the same one again. Asked for during the rest of the exit, after the owner's
// destructor: a new one, leaked, never a destroyed one.
template <typename T, void* TracerThreadState::*Slot>
__attribute__((noinline)) T& new_thread_owned(TracerThreadState& ts) {
  thread_local bool gone = false;  // trivially destructible: readable for the rest of the exit
  struct Owner {
    T* object = nullptr;
    ~Owner() {
      delete object;
      object = nullptr;
      gone = true;
      thread_state().*Slot = nullptr;
    }
  };
  if (gone) {
    T* leaked = new T;
    ts.*Slot = leaked;
    return *leaked;
  }
  thread_local Owner owner;
  if (owner.object == nullptr) owner.object = new T;
  ts.*Slot = owner.object;
  return *owner.object;
}
template <typename T, void* TracerThreadState::*Slot>
T& thread_owned(TracerThreadState& ts) {
  void* p = ts.*Slot;
  return p != nullptr ? *static_cast<T*>(p) : new_thread_owned<T, Slot>(ts);
}

// Marks the calling thread's CUDA calls as the tracer's own for the guard's lifetime.
struct InternalCallGuard {
  InternalCallGuard() { ++thread_state().internal; }
  ~InternalCallGuard() { --thread_state().internal; }
  InternalCallGuard(const InternalCallGuard&) = delete;
  InternalCallGuard& operator=(const InternalCallGuard&) = delete;
};

}  // namespace streamrace::tracer
