// Trace scripts: a synthetic CUDA program as text, one TraceBuilder call per line, so a test
// case is a small file next to its expected report (tests/README.md has the whole language).
//
//   stream a                      # a = create_stream() (non-blocking; `blocking` for flags 0)
//   alloc buf 4096                # buf = alloc(4096)
//   at producer.py:10 produce     # the stack of the following calls
//   memset a buf 4096
//   event e
//   record e a
//   wait b e
//   memcpy b dst buf+1024 2048
//
// Names are bound by stream/event/alloc/comm; an address is NAME, NAME+N or a number; a stream
// is NAME, `legacy[:DEVICE]` or `per-thread:THREAD[:DEVICE]`. `rank N` starts the trace of
// another process (rank N), which has its own names.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace streamrace::testing {

// Runs the script at `script`, writing its traces into `out_dir`: `<stem>.srace`, or
// `<stem>.rank<N>.srace` per `rank N` section. Returns the trace paths. Throws
// std::runtime_error("file:line: ...") on a line it cannot run.
std::vector<std::string> run_trace_script(const std::filesystem::path& script, const std::filesystem::path& out_dir);

}  // namespace streamrace::testing
