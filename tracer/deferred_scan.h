// DeferredScan: a kernel launch's argument scan, finished by the flusher instead of the thread
// that launched.
//
// A launch's record names the parameter words that point into live allocations, and the
// arguments' hash of every word with those pointers marked (tracer/cuda_call_handler.cpp says
// which words, in what order). Done on the launching thread, that scan was most of the
// tracer's own time per launch: a bounds search, a table lookup per candidate word, the
// hash, for every launch (GPT-2 ZeRO-2: 1.7 KB cuBLAS parameter blocks, 1 KB reductions). With
// deferral the launching thread only copies the words the scan would read (each parameter's
// size, then its bytes in words) and the allocation table's version into a deferred record
// (kDeferredKernelLaunch, tracer/trace_recorder.h); the flusher scans them later, against
// its own copy of the table as it was at that version, and writes the very KernelLaunch
// record the launching thread would have written.
//
// The table's copy: the table logs every change (AllocationChangeLog, in version order) once
// the scan asks it to. A drain's deferred launches are finished in version order while the
// copy replays the log forwards, so each is scanned against the table at its own version. A
// launch that arrives after its version was passed (it read the version just before a
// change, and committed its record just after a drain began) is scanned against the table
// rebuilt at its version from the changes kept since (the last kHistory of them); one older
// than those is scanned against the oldest table that can be rebuilt, counted, and reported
// in the trace as a warning: never silently.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "traceformat/records.h"
#include "tracer/allocation_table.h"
#include "tracer/kernel_signatures.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer {

// After a deferred record's KernelLaunchHead (its nptrs 0, its flags only kKernelPrecise):
// this, then `nwords` words (per parameter: its size, then its bytes in words, the leftover
// bytes zero-extended), then `blas_count` library-call ranges (3 words each, as a
// kKernelCallAccesses launch carries them).
struct DeferredLaunchTail {
  uint64_t version = 0;    // the allocation table's, read before the words were copied
  uint64_t signature = 0;  // const KernelSignature* (built-in, never freed), or 0
  uint32_t nwords = 0;
  uint32_t nparams = 0;
  uint32_t blas_count = 0;
  uint8_t misaligned = 0;  // a pointer's alignment less one (kernel_signatures.h)
  uint8_t pad[3] = {};
};
static_assert(sizeof(DeferredLaunchTail) == 32);
constexpr size_t kDeferredTailWords = sizeof(DeferredLaunchTail) / sizeof(uint64_t);

class DeferredScan : public DeferredResolver {
 public:
  // Changes kept for launches that arrive after their version was passed.
  static constexpr size_t kHistory = 1u << 16;

  // Launches older than the log's start cannot be scanned at their version (counted inexact).
  explicit DeferredScan(std::shared_ptr<AllocationChangeLog> log)
      : log_(std::move(log)), version_(log_->start_version()), history_floor_(log_->start_version()) {}
  void resolve(std::vector<Item>& items, std::vector<uint8_t>& out, bool nonblocking) override;
  std::string take_notice() override;

  // For tests: launches finished, those scanned against a rebuilt table, and those scanned
  // against one not at their version.
  uint64_t resolved() const { return resolved_; }
  AllocationChangeLog& log() const { return *log_; }
  uint64_t rebuilt() const { return rebuilt_; }
  uint64_t inexact() const { return inexact_; }

 private:
  using Table = std::map<uint64_t, LiveAllocation>;
  void apply(const AllocationChange& c);
  // The table at `version` (the copy itself when it is there). Launches come in version order
  // within a drain: a rebuilt table is rolled forwards to a later version, not rebuilt.
  const Table& table_at(uint64_t version);
  void scan(const Item& item, const Table& table, std::vector<uint8_t>& out, Item& result);

  std::shared_ptr<AllocationChangeLog> log_;
  std::vector<AllocationChange> pending_;  // taken from the log, not yet applied
  size_t pending_at_ = 0;
  Table live_;
  uint64_t version_ = 0;  // of the last change applied (the log's start before any)
  uint64_t lo_ = ~0ull, hi_ = 0;  // every allocation ever applied lies inside (as the table's bounds)
  std::deque<AllocationChange> history_;  // the last changes applied, oldest first
  uint64_t history_floor_ = 0;            // below it no table can be rebuilt (dropped changes, the log's start)
  Table rebuilt_table_;
  uint64_t rebuilt_version_ = 0;
  bool rebuilt_valid_ = false;
  uint64_t resolved_ = 0, rebuilt_ = 0, inexact_ = 0, inexact_reported_ = 0;
  uint64_t unfinished_ = 0, unfinished_reported_ = 0;  // deferred records that did not read
  std::vector<uint64_t> words_, ptrs_;
  std::vector<uint32_t> order_;
};

}  // namespace streamrace::tracer
