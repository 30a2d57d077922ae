// LaunchCorpus: a benchmark's record of real kernel launches as the argument scan sees them
// (setting launch_corpus, docs/tracer.md): each launched function's mangled name and parameter
// layout, each launch's grid, block and parameter bytes, and the live allocations its pointer
// words fell into, written as text. bench/launch_replay.cpp feeds such a file back through
// CudaCallHandler on the CPU machine, so that the scan's cost on a real job's launches can be
// measured (and profiled under callgrind) where no GPU is. Not for tracing: it slows every
// launch it writes and stops writing after COUNT of them.
//
// PATH may hold %p, the process id (one file per process of a job: without it every process
// that writes launches writes the same file). The file is made at the first launch written, so
// a process that launches nothing (a shell, a data loader) leaves no file and truncates none;
// each item is one write(2), so nothing is buffered that a forked child or an exit before
// COUNT could lose or write twice.
//
// The file, one item per line:
//   streamrace-launch-corpus 1
//   func ID HANDLE NSLOTS OFFSET:SIZE... NAME
//   alloc BASE BYTES KIND          (hex base and bytes; KIND a trace::AllocKind)
//   launch ID NPTRS GX GY GZ BX BY BZ HEX   (the pointers the scan found; every parameter's
//                                           bytes, in layout order, back to back)
//   table N                         (at the end: the N allocations live then follow as alloc lines)
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tracer/allocation_table.h"
#include "tracer/cuda_queries.h"

namespace streamrace::tracer {

struct CudaCall;

class LaunchCorpus {
 public:
  // SPEC: PATH[:SKIP[:COUNT]] (SKIP launches first go unwritten, then COUNT are written;
  // defaults 0 and 20000). Null, with `why` set, when SPEC names no file or PATH's folder
  // cannot be written.
  static std::unique_ptr<LaunchCorpus> open(const std::string& spec, std::string* why);
  ~LaunchCorpus();
  // One scanned launch of `func` (its callback's `name`), its parameters at `layout`.
  void add(uint64_t func, const char* name, std::span<const ParamSlot> layout, const CudaCall& call,
           std::span<const uint64_t> live_words, const AllocationTable& allocs);
  // Writes the live allocations and closes the file (done by itself once COUNT are written; a
  // corpus whose process ends first has no table, and bench/launch_replay reads it as it is).
  void finish(const AllocationTable& allocs);

 private:
  void finish_locked(const AllocationTable& allocs);
  // Opens the file at the first launch written (false: it cannot be; said once on stderr).
  bool ensure_open();
  void put(const std::string& text);
  LaunchCorpus(std::string path, uint64_t skip, uint64_t count) : path_(std::move(path)), skip_(skip), count_(count) {}
  std::mutex mu_;
  std::string path_;
  int fd_ = -1;
  bool done_ = false;  // COUNT written (or the file could not be made)
  uint64_t skip_, count_;
  uint64_t seen_ = 0;
  std::unordered_map<uint64_t, uint32_t> ids_;
  std::unordered_set<uint64_t> allocs_written_;
};

}  // namespace streamrace::tracer
