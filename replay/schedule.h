// The replay schedule IR: what a host program issues onto which stream, in issue order,
// with the exact byte ranges every device operation reads and writes. Generators
// (zero_schedule.h) and the trace lifter (trace_lifter.h) produce it; the trace emitter,
// the CPU stream simulator and the GPU executor consume it. One Schedule is the program of
// one rank; `world` and `rank` say which.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace streamrace::replay {

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

enum class StreamKind {
  kLegacyDefault,  // handle 0: implicitly ordered with every blocking stream of the device
  kBlocking,       // cudaStreamCreate without flags
  kNonBlocking,    // cudaStreamNonBlocking (every PyTorch side stream)
};

struct Stream {
  std::string name;  // "compute", "reduction", ...
  StreamKind kind = StreamKind::kNonBlocking;
  uint64_t handle = 0;  // lifted schedules: the handle in the source trace (0 = assign one)
};

struct Buffer {
  std::string name;        // "ipg_buffer[0]"
  uint64_t bytes = 0;
  uint64_t address = 0;    // lifted schedules: the allocation's base in the source trace
  std::string role;        // "gradient", "bucket", "partition", "temp", "param", "external"
  // How it was allocated: "device", "async", "managed", "pinned-host", "registered-host",
  // "vmm", or "external" (host memory the trace never allocated; not written back as an alloc).
  std::string alloc = "device";
};

struct ByteRange {
  uint32_t buffer = kNone;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t end() const { return offset + bytes; }
  bool overlaps(const ByteRange& o) const {
    return buffer == o.buffer && offset < o.end() && o.offset < end();
  }
  bool operator==(const ByteRange&) const = default;
};

// One source location of the pseudo program (innermost frame first in a stack).
struct Site {
  std::string file;
  std::string function;
  uint32_t line = 0;
  bool python = true;
  bool operator==(const Site&) const = default;
};

enum class ActionKind {
  // Device operations (issued onto `stream`).
  kProduce,     // a backward kernel writes the known gradient of `param` into writes[0]
  kCompute,     // an opaque kernel: reads `reads`, writes `writes` (lifted kernels)
  kCopy,        // reads[0] -> writes[0], same length (gradient copy-in, flatten, partition copy)
  kCopyBack,    // like kCopy; the reduced data going back into the bucket or partition
  kDivide,      // in place: writes[0] = reads[0] / divisor
  kCollective,  // NCCL: reads[0] is the send range, writes[0] the receive range (this rank)
  kMemset,      // writes[0] = fill
  kSpin,        // occupies the stream for spin_ns; touches no memory (delay injection)
  kEventRecord,  // record `event` on `stream`
  kStreamWait,   // `stream` waits on the latest record of `event` issued before this call
  // Host operations.
  kStreamSync,  // host waits for everything issued to `stream` so far
  kEventSync,   // host waits for the latest record of `event`
  kDeviceSync,  // host waits for every stream
  // Allocation lifetimes (host operations naming `buffer`; see Schedule::live_at_start).
  kAlloc,  // cudaMalloc (or Managed/Host): `buffer` becomes live with undefined contents
  kFree,   // cudaFree (or FreeHost): the device synchronises first, then `buffer` is dead
};

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather };

const char* to_string(ActionKind k);
const char* to_string(CollectiveKind k);
const char* to_string(StreamKind k);
bool is_device_op(ActionKind k);     // issued onto a stream and occupying it
bool touches_memory(ActionKind k);   // reads or writes device memory
bool is_host_sync(ActionKind k);
bool is_lifetime(ActionKind k);      // kAlloc or kFree

struct Action {
  ActionKind kind = ActionKind::kCompute;
  uint32_t stream = kNone;
  uint32_t event = kNone;
  uint32_t buffer = kNone;  // kAlloc, kFree
  std::string label;  // what a reader sees in timelines and reports
  std::vector<ByteRange> reads;
  std::vector<ByteRange> writes;
  std::vector<Site> stack;  // innermost first; becomes the trace's call stack

  CollectiveKind collective = CollectiveKind::kAllReduce;
  uint64_t divisor = 1;      // kDivide
  uint64_t fill = 0;         // kMemset: the value every cell gets
  uint64_t spin_ns = 0;      // kSpin
  uint32_t param = kNone;    // kProduce: which parameter's gradient
  uint64_t param_offset = 0; // kProduce: element of the parameter that writes[0] starts at
  int32_t flush = -1;        // generators: the bucket flush this action belongs to
  uint64_t cost_ns = 0;      // timed simulation: how long the op runs (0 = derive from bytes)
  bool host_blocking = false;  // a synchronous API: the host waits for this op to finish

  // Lifted schedules: where the action came from and how to write it back faithfully.
  std::string api;                   // "cudaMemcpyAsync", kernel name, "ncclAllReduce"
  uint64_t source_seq = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> kernel_ptrs;  // pointer arguments of a lifted kernel
  bool exact = true;                  // ranges and directions known exactly
};

// A parameter whose gradient the program reduces (generators only).
struct Param {
  std::string name;
  uint64_t elements = 0;
};

// After a step, `range` must hold the averaged gradient of `param`, elements
// [param_offset, param_offset + range.bytes / elem_bytes).
struct Expectation {
  ByteRange range;
  uint32_t param = kNone;
  uint64_t param_offset = 0;
  std::string label;
};

struct Schedule {
  std::string name;         // "zero stage 1 fix=none"
  std::string description;
  int world = 1;
  int rank = 0;
  std::string dtype = "fp32";  // fp32, fp16, bf16: the element type of the NCCL calls
  uint32_t elem_bytes = 4;
  std::vector<Stream> streams;
  std::vector<std::string> events;
  std::vector<Buffer> buffers;
  std::vector<Param> params;
  std::vector<Action> actions;  // the host program, in issue order
  std::vector<Expectation> expectations;
  std::map<std::string, std::string> meta;  // generator parameters, source trace path

  uint32_t add_stream(std::string name, StreamKind kind, uint64_t handle = 0);
  uint32_t add_event(std::string name);
  uint32_t add_buffer(std::string name, uint64_t bytes, std::string role, uint64_t address = 0,
                      std::string alloc = "device");
  uint32_t find_stream(const std::string& name) const;  // kNone if absent
  uint32_t find_buffer(const std::string& name) const;
  // A range of elements of a buffer.
  ByteRange elems(uint32_t buffer, uint64_t first, uint64_t count) const {
    return ByteRange{buffer, first * elem_bytes, count * elem_bytes};
  }
  // The granule every range, buffer and collective chunk is a multiple of.
  uint64_t cell_bytes() const;
  // Allocation lifetimes. A buffer whose first kAlloc/kFree action is a kAlloc is dead when the
  // program starts; every other buffer (most have no such action) is live from the start.
  // kAlloc and kFree of a buffer alternate; no action touches a buffer while it is dead.
  // A re-allocated buffer has undefined contents; in an emitted trace it gets a new address
  // (unless the buffer has its own address).
  std::vector<uint8_t> live_at_start() const;
  std::vector<uint8_t> live_at_end() const;
  // Every buffer ends the program as it started (so the program can be repeated step by step).
  bool lifetimes_balanced() const { return live_at_start() == live_at_end(); }
  // Empty when the schedule is well formed, else one message per problem.
  std::vector<std::string> validate() const;
};

uint32_t dtype_bytes(const std::string& dtype);  // 0 for an unknown name

void to_json(nlohmann::json& j, const Schedule& s);
void from_json(const nlohmann::json& j, Schedule& s);
// Throws std::runtime_error naming the problem.
Schedule schedule_from_json_text(const std::string& text);
std::string schedule_to_json_text(const Schedule& s, int indent = 2);

}  // namespace streamrace::replay
