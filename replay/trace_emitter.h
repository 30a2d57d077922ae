// Writes a schedule as a streamrace trace (through TraceBuilder), so the real analyzer judges
// it: copies become cudaMemcpyAsync, produce/compute/divide kernels with their pointer
// arguments (and exact KernelAccess intervals when the schedule knows them), collectives NCCL
// calls, records/waits/syncs the matching CUDA calls, each with the action's call stack.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "replay/schedule.h"

namespace streamrace::replay {

struct EmitOptions {
  uint32_t steps = 1;           // the host program is written this many times
  bool precise_kernels = true;  // exact kernel accesses as KernelAccess records (precise tier)
  int64_t pid = 0;              // 0: 1000 + rank
  std::string producer = "streamrace replay";  // the header's producer
  bool compress = true;         // zstd chunks
  // When set, step k >= 1 writes the schedule this returns for k instead of the first one
  // again: a program whose steps differ (fresh random side traffic, other buffers churned).
  // Each must have the first schedule's buffers (sizes), streams and events and balanced
  // lifetimes; emit_trace throws std::invalid_argument otherwise.
  std::function<Schedule(uint32_t step)> step_schedule;
};

struct EmitResult {
  std::string path;
  std::vector<uint64_t> seq_of_action;  // first step's seq per action
  std::vector<uint64_t> stream_handle;  // per schedule stream
  uint64_t calls = 0;                   // call records written (seqs 0 .. calls - 1)
};

// The base address a buffer gets in the trace (its own address when lifted); a buffer that
// the schedule frees and allocates again gets a new one for every later allocation.
uint64_t emitted_address(const Schedule& s, uint32_t buffer);

EmitResult emit_trace(const Schedule& s, const std::string& path, const EmitOptions& opts = {});

}  // namespace streamrace::replay
