// A stand-in libnccl.so.2 for testing the interposer: strong pnccl* functions with weak
// ncclX aliases, as the real library is built. Each call appends one line to the file named
// by FAKE_NCCL_LOG, so tests can check the real function got the caller's exact arguments.
#include <nccl.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace {

struct FakeComm {
  int rank;
  int nranks;
  int device;
};

void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_line(const char* fmt, ...) {
  const char* path = std::getenv("FAKE_NCCL_LOG");
  if (!path) return;
  FILE* f = std::fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(f, fmt, ap);
  va_end(ap);
  std::fputc('\n', f);
  std::fclose(f);
}

}  // namespace

#define ALIAS(NAME) __attribute__((weak, alias("p" #NAME)))

extern "C" {

ncclResult_t pncclGetVersion(int* v) {
  *v = 22809;
  return ncclSuccess;
}
ncclResult_t ncclGetVersion(int* v) ALIAS(ncclGetVersion);

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = reinterpret_cast<ncclComm_t>(new FakeComm{rank, nranks, rank});
  log_line("CommInitRank nranks=%d rank=%d", nranks, rank);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int) ALIAS(ncclCommInitRank);

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  *newcomm = reinterpret_cast<ncclComm_t>(new FakeComm{0, 1, c->device});
  log_line("CommSplit color=%d key=%d", color, key);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) ALIAS(ncclCommSplit);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = reinterpret_cast<FakeComm*>(comm)->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t, int*) ALIAS(ncclCommUserRank);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  *count = reinterpret_cast<FakeComm*>(comm)->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t, int*) ALIAS(ncclCommCount);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  *device = reinterpret_cast<FakeComm*>(comm)->device;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t, int*) ALIAS(ncclCommCuDevice);

ncclResult_t pncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t,
                            cudaStream_t st) {
  log_line("AllReduce send=%p recv=%p count=%zu type=%d op=%d stream=%p", s, r, n, int(t), int(op),
           static_cast<void*>(st));
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)
    ALIAS(ncclAllReduce);

ncclResult_t pncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t, cudaStream_t) {
  log_line("Broadcast send=%p recv=%p count=%zu type=%d root=%d", s, r, n, int(t), root);
  return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)
    ALIAS(ncclBroadcast);

ncclResult_t pncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
  log_line("Send send=%p count=%zu type=%d peer=%d", s, n, int(t), peer);
  return ncclSuccess;
}
ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) ALIAS(ncclSend);

ncclResult_t pncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
  log_line("Recv recv=%p count=%zu type=%d peer=%d", r, n, int(t), peer);
  return ncclSuccess;
}
ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) ALIAS(ncclRecv);

ncclResult_t pncclGroupStart() {
  log_line("GroupStart");
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() ALIAS(ncclGroupStart);
ncclResult_t pncclGroupEnd() {
  log_line("GroupEnd");
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() ALIAS(ncclGroupEnd);

}  // extern "C"
