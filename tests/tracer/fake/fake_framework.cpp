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
