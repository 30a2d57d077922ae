// streamrace-launch-replay: a real job's kernel launches, as recorded on the GPU machine by the
// tracer's launch_corpus setting (tracer/launch_corpus.h), fed back through CudaCallHandler on
// a machine with no GPU: each launch as the driver launch's exit callback the tracer sees, with
// the recorded parameter bytes, the recorded functions' names and layouts (as the driver gave
// them) and the recorded allocations live in the table. So the argument scan and the record
// cost what they cost on that job's launches (PyTorch's OffsetCalculator structs, cuBLAS and
// flash-attention parameter blocks, the pointers' spread over segments), not on a synthetic
// kernel's; no stacks (StackCapture has its own benchmarks).
//
//   streamrace-launch-replay CORPUS [LAUNCHES] [COLD_KIB] [COLD_CODE_KIB]
//
// CORPUS: the text file, or the same compressed with zstd (.zst). LAUNCHES (default 100000):
// the corpus's launches replayed in order, again from the start when they run out. COLD_KIB
// (default 0): as in bench/handler_cost.cpp, between launches the loop writes COLD_KIB KiB of
// other memory and is timed in blocks with and without the callbacks, alternating; the figure
// printed is the median of the blocks' differences. COLD_CODE_KIB (default 0): the same loop
// also runs through COLD_CODE_KIB KiB of other code (one jump per 64-byte line), as PyTorch's
// dispatch does between two launches, so that the handler's code is no longer in the
// instruction cache either. Under callgrind, bench/launch_replay.sh
// counts instructions and cache misses per launch. STREAMRACE_DEFER_SCAN=0 scans on the
// launching thread (the tracer's setting defer_scan); by default the scan is left to the
// recorder's flusher (tracer/deferred_scan.h), which bench/launch_replay.sh counts apart with
// TOGGLE='*DeferredScan::resolve*'. Exit status 2 when the corpus does not read.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/bench_support.h"
#include "tracer/allocation_table.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/cuda_queries.h"
#include "tracer/host_clock.h"
#include "tracer/thread_state.h"
#include "tracer/trace_recorder.h"
#include "traceformat/trace_file.h"

using namespace streamrace;
using namespace streamrace::tracer;
using bench::now_ns;

namespace {

struct Function {
  uint64_t handle = 0;
  std::string name;
  std::vector<ParamSlot> layout;
};

struct Launch {
  uint32_t function = 0;
  uint32_t nptrs = 0;  // the pointers the tracer's scan found on the GPU machine
  uint32_t grid[3], block[3];
  size_t bytes_at = 0;  // into Corpus::bytes
};

struct Corpus {
  std::vector<Function> functions;
  std::vector<Launch> launches;
  std::vector<uint8_t> bytes;
  std::vector<LiveAllocation> seen;   // allocations the launches' pointers fell into, in order
  std::vector<LiveAllocation> table;  // those live when the corpus ended
};

// The recorded functions' layouts and names, as the driver gave them on the GPU machine.
class ReplayQueries : public CudaQueries {
 public:
  explicit ReplayQueries(const Corpus& c) {
    for (const Function& f : c.functions) by_handle_[f.handle] = &f;
  }
  uint32_t device_of_context(uint64_t) override { return 0; }
  bool param_layout(uint64_t func, bool, std::vector<ParamSlot>& out) override {
    auto it = by_handle_.find(func);
    if (it == by_handle_.end()) return false;
    out = it->second->layout;
    return true;
  }
  trace::MemKind memory_kind(uint64_t) override { return trace::MemKind::kDevice; }
  const char* function_name(uint64_t func, bool) override {
    auto it = by_handle_.find(func);
    return it == by_handle_.end() ? nullptr : it->second->name.c_str();
  }

 private:
  std::unordered_map<uint64_t, const Function*> by_handle_;
};

bool read_text(const std::string& path, std::string& text, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be read";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string raw = ss.str();
  if (raw.size() >= 4 && uint8_t(raw[0]) == 0x28 && uint8_t(raw[1]) == 0xB5 && uint8_t(raw[2]) == 0x2F &&
      uint8_t(raw[3]) == 0xFD) {
    // Streamed: a file zstd wrote from a pipe does not say its size.
    ZSTD_DStream* z = ZSTD_createDStream();
    ZSTD_inBuffer in{raw.data(), raw.size(), 0};
    std::vector<char> buf(1 << 20);
    size_t rc = 1;
    while (in.pos < in.size) {
      ZSTD_outBuffer out{buf.data(), buf.size(), 0};
      rc = ZSTD_decompressStream(z, &out, &in);
      if (ZSTD_isError(rc)) break;
      text.append(buf.data(), out.pos);
      if (text.size() > (1ull << 31)) break;
    }
    ZSTD_freeDStream(z);
    if (ZSTD_isError(rc) || rc != 0) {
      why = std::string("does not decompress: ") + (ZSTD_isError(rc) ? ZSTD_getErrorName(rc) : "truncated or too large");
      return false;
    }
    return true;
  }
  text = std::move(raw);
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool parse(const std::string& text, Corpus& c, std::string& why) {
  std::istringstream in(text);
  std::string line;
  size_t lineno = 0;
  bool in_table = false;
  auto fail = [&](const std::string& what) {
    why = "line " + std::to_string(lineno) + ": " + what;
    return false;
  };
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    if (lineno == 1) {
      int version = 0;
      if (kind != "streamrace-launch-corpus" || !(f >> version) || version != 1)
        return fail("not a launch corpus of version 1 (its first line is 'streamrace-launch-corpus 1')");
      continue;
    }
    if (kind == "func") {
      Function fn;
      uint32_t id = 0;
      size_t n = 0;
      if (!(f >> id >> std::hex >> fn.handle >> std::dec >> n) || id != c.functions.size() || n > 4096)
        return fail("a func line is 'func ID HANDLE NSLOTS OFFSET:SIZE... NAME', IDs in order");
      for (size_t i = 0; i < n; ++i) {
        std::string slot;
        f >> slot;
        unsigned off = 0, size = 0;
        char colon = 0;
        std::istringstream s(slot);
        if (!(s >> off >> colon >> size) || colon != ':' || size > 32768) return fail("bad slot '" + slot + "'");
        fn.layout.push_back(ParamSlot{off, size});
      }
      if (!(f >> fn.name)) return fail("a func line without a name");
      c.functions.push_back(std::move(fn));
    } else if (kind == "alloc") {
      LiveAllocation a;
      unsigned k = 0;
      if (!(f >> std::hex >> a.base >> a.bytes >> std::dec >> k)) return fail("an alloc line is 'alloc BASE BYTES KIND'");
      a.kind = trace::AllocKind(k);
      (in_table ? c.table : c.seen).push_back(a);
    } else if (kind == "launch") {
      Launch l;
      std::string hex;
      if (!(f >> l.function >> l.nptrs >> l.grid[0] >> l.grid[1] >> l.grid[2] >> l.block[0] >> l.block[1] >> l.block[2]) ||
          l.function >= c.functions.size())
        return fail("a launch line is 'launch ID NPTRS GX GY GZ BX BY BZ HEX' of a func before it");
      f >> hex;
      size_t want = 0;
      for (const ParamSlot& s : c.functions[l.function].layout) want += s.size;
      if (hex.size() != 2 * want) return fail("a launch's bytes do not match its function's layout");
      l.bytes_at = c.bytes.size();
      for (size_t i = 0; i < want; ++i) {
        const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return fail("a launch's bytes are not hex");
        c.bytes.push_back(uint8_t(hi * 16 + lo));
      }
      c.launches.push_back(l);
    } else if (kind == "table") {
      in_table = true;
    } else if (!kind.empty()) {
      return fail("unknown line '" + kind + "'");
    }
  }
  if (c.launches.empty()) {
    why = "holds no launch";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: streamrace-launch-replay CORPUS [LAUNCHES] [COLD_KIB] [COLD_CODE_KIB]\n");
    return 2;
  }
  const std::string path = argv[1];
  const long launches = argc > 2 ? std::atol(argv[2]) : 100000;
  const size_t cold_kib = argc > 3 ? size_t(std::atol(argv[3])) : 0;
  const size_t cold_code_kib = argc > 4 ? size_t(std::atol(argv[4])) : 0;
  Corpus corpus;
  std::string text, why;
  if (!read_text(path, text, why) || !parse(text, corpus, why)) {
    std::fprintf(stderr, "streamrace-launch-replay: %s %s\n", path.c_str(), why.c_str());
    return 2;
  }
  text.clear();
  const bench::BenchTrace bt = bench::bench_trace("launch_replay", "launch replay");
  const auto& dir = bt.dir;
  const RecorderOptions& o = bt.options;
  TraceRecorder rec(o);
  AllocationTable allocs;
  // The allocations the launches' pointers fell into, then those live at the end; one that
  // overlaps one already in (a segment freed and another made there) stays out.
  auto add = [&](const LiveAllocation& a) {
    if (a.bytes == 0 || allocs.find(a.base) || allocs.find(a.base + a.bytes - 1)) return;
    allocs.insert(a);
  };
  for (const LiveAllocation& a : corpus.seen) add(a);
  for (const LiveAllocation& a : corpus.table) add(a);
  ReplayQueries queries(corpus);
  CudaCallHandler handler(rec, allocs, queries, nullptr);
  // STREAMRACE_DEFER_SCAN=0: the scan on the launching thread, as the tracer's setting does.
  const char* defer = std::getenv("STREAMRACE_DEFER_SCAN");
  handler.set_deferred_scan(defer == nullptr || std::strcmp(defer, "0") != 0);
  // STREAMRACE_HOST_CLOCK=tsc: the records' times from the time-stamp counter (tracer/host_clock.h),
  // scaled before the first launch rather than after the recorder's first flush period.
  if (const char* clock = std::getenv("STREAMRACE_HOST_CLOCK"); clock != nullptr && std::strcmp(clock, "tsc") == 0) {
    std::string why;
    if (!host_clock::tsc_usable(&why)) {
      std::fprintf(stderr, "launch_replay: STREAMRACE_HOST_CLOCK=tsc: %s\n", why.c_str());
      return 2;
    }
    host_clock::start_tsc();
    usleep(useconds_t(host_clock::kMinBaselineNs / 1000 + 10000));
    host_clock::adjust();
  }
  thread_state() = TracerThreadState{};
  // Each launch's kernelParams: a pointer per parameter into its recorded bytes.
  std::vector<std::vector<void*>> args(corpus.launches.size());
  size_t param_bytes = 0;
  for (size_t i = 0; i < corpus.launches.size(); ++i) {
    const Launch& l = corpus.launches[i];
    size_t at = l.bytes_at;
    for (const ParamSlot& s : corpus.functions[l.function].layout) {
      args[i].push_back(corpus.bytes.data() + at);
      at += s.size;
    }
    param_bytes += at - l.bytes_at;
  }
  const CUstream stream = reinterpret_cast<CUstream>(0x5000);
  std::vector<uint64_t> other(cold_kib * 1024 / sizeof(uint64_t) + 1);
  // Other code: each 64-byte line a short jump to the next, the last a return.
  using CodeFn = void (*)();
  CodeFn other_code = nullptr;
  if (cold_code_kib > 0) {
    const size_t bytes = cold_code_kib * 1024;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "streamrace-launch-replay: no memory for %zu KiB of code\n", cold_code_kib);
      return 2;
    }
    auto* code = static_cast<uint8_t*>(m);
    std::memset(code, 0x90, bytes);  // nop
    for (size_t at = 0; at + 64 < bytes; at += 64) {
      code[at] = 0xEB;  // jmp rel8: to the next line
      code[at + 1] = 62;
    }
    code[bytes - 64] = 0xC3;  // ret
    if (mprotect(m, bytes, PROT_READ | PROT_EXEC) != 0) {
      std::fprintf(stderr, "streamrace-launch-replay: cannot make code executable\n");
      return 2;
    }
    other_code = reinterpret_cast<CodeFn>(m);
  }
  auto other_work = [&] {  // one write per cache line of `other`, one jump per line of code
    for (size_t k = 0; k < other.size(); k += 8) other[k] += k;
    if (other_code) other_code();
  };
  std::vector<uint32_t> replayed;  // the corpus's launch of each traced launch, in order
  replayed.reserve(size_t(launches));
  auto launch = [&](long i) {
    const size_t n = size_t(i) % corpus.launches.size();
    replayed.push_back(uint32_t(n));
    const Launch& l = corpus.launches[n];
    const Function& fn = corpus.functions[l.function];
    cuLaunchKernel_params p{reinterpret_cast<CUfunction>(fn.handle), l.grid[0], l.grid[1], l.grid[2], l.block[0],
                            l.block[1], l.block[2], 0, stream, args[n].data(), nullptr};
    handler.on_call(ApiCall{ApiDomain::kDriver, false, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, fn.name.c_str(), &p, 0,
                            uint32_t(i + 1), 0x100});
  };
  std::printf("corpus %s: %zu launches of %zu functions, %.0f parameter bytes per launch, %zu allocations in the table\n",
              path.c_str(), corpus.launches.size(), corpus.functions.size(),
              double(param_bytes) / double(corpus.launches.size()), allocs.size());
  // The trace the replay wrote: each launch's pointers, against what the tracer found on the
  // GPU machine (a difference: the replay's table or layouts are not the job's).
  auto check = [&] {
    rec.close();
    size_t k = 0, same = 0;
    trace::TraceReader reader(o.path);
    reader.for_each([&](const trace::RecordView& v) {
      if (v.kind != trace::RecordKind::kKernelLaunch || k >= replayed.size()) return;
      same += v.as<trace::KernelLaunchHead>().nptrs == corpus.launches[replayed[k++]].nptrs;
    });
    std::filesystem::remove_all(dir);
    std::printf("pointers found: as on the GPU machine in %zu of %zu launches\n", same, replayed.size());
  };
  if (cold_kib > 0 || cold_code_kib > 0) {
    const bench::BlockTimes t = bench::alternate_blocks(launches, 2000, [&](long i, bool traced) {
      other_work();
      if (traced) launch(i);
    });
    check();
    std::printf("launches=%ld cold_kib=%zu cold_code_kib=%zu: %.1f ns added per launch (median of %zu pairs of blocks; thread CPU time; "
                "loop alone %.1f ns)\n",
                launches, cold_kib, cold_code_kib, t.added, t.pairs, t.off);
    return 0;
  }
  const double cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < launches; ++i) launch(i);
  const double cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  std::printf("launches=%ld: %.1f ns per launch (thread CPU time)\n", launches, cpu / double(launches));
  std::printf("launch memo: %llu of %ld launches took a memoised scan\n",
              (unsigned long long)CudaCallHandler::memo_hits_of_this_thread(), launches);
  check();
  return 0;
}
