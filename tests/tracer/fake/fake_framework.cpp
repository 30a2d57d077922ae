// Plays PyTorch's part: a library that links libnccl.so.2 and is itself loaded with
// RTLD_LOCAL, so NCCL sits in a local scope where dlsym(RTLD_NEXT) cannot find it.
#include <nccl.h>

extern "C" __attribute__((visibility("default"))) int fake_framework_run() {
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 2, id, 1) != ncclSuccess) return 1;
  auto stream = reinterpret_cast<cudaStream_t>(0x5000);
  auto buf = reinterpret_cast<void*>(0x7000'0000);
  if (ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) return 2;
  ncclGroupStart();
  ncclSend(buf, 16, ncclBfloat16, 0, comm, stream);
  ncclRecv(reinterpret_cast<void*>(0x7000'1000), 16, ncclBfloat16, 0, comm, stream);
  ncclGroupEnd();
  ncclComm_t sub = nullptr;
  if (ncclCommSplit(comm, 0, 1, &sub, nullptr) != ncclSuccess) return 3;
  if (ncclBroadcast(buf, buf, 8, ncclInt64, 0, sub, nullptr) != ncclSuccess) return 4;
  return 0;
}

// One traced call a call (the Python stack benchmarks' alternating call sites): an all-reduce on
// a communicator made at the first call.
extern "C" __attribute__((visibility("default"))) int fake_framework_allreduce() {
  static ncclComm_t comm = [] {
    ncclUniqueId id{};
    ncclComm_t c = nullptr;
    return ncclCommInitRank(&c, 2, id, 1) == ncclSuccess ? c : nullptr;
  }();
  if (comm == nullptr) return 1;
  auto buf = reinterpret_cast<void*>(0x7000'0000);
  return ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(0x5000)) == ncclSuccess ? 0 : 2;
}

// Plays PyTorch's autograd device thread: a native thread that holds a Python thread state of
// its own (made once with PyGILState_Ensure, the GIL then released with PyEval_SaveThread, as
// PyTorch's engine does) but runs no Python code, and makes `runs` calls from there. The CPython
// API is found at run time, as the tracer finds it; returns -1 without Python.
#include <dlfcn.h>

#include <thread>

extern "C" __attribute__((visibility("default"))) int fake_framework_run_in_native_thread(int runs) {
  using Ensure = int (*)();
  using Release = void (*)(int);
  using Save = void* (*)();
  using Restore = void (*)(void*);
  auto ensure = reinterpret_cast<Ensure>(dlsym(RTLD_DEFAULT, "PyGILState_Ensure"));
  auto release = reinterpret_cast<Release>(dlsym(RTLD_DEFAULT, "PyGILState_Release"));
  auto save = reinterpret_cast<Save>(dlsym(RTLD_DEFAULT, "PyEval_SaveThread"));
  auto restore = reinterpret_cast<Restore>(dlsym(RTLD_DEFAULT, "PyEval_RestoreThread"));
  if (!ensure || !release || !save || !restore) return -1;
  int rc = 0;
  std::thread t([&] {
    const int state = ensure();
    void* ts = save();
    for (int i = 0; i < runs && rc == 0; ++i) rc = fake_framework_run();
    restore(ts);
    release(state);
  });
  t.join();
  return rc;
}
