// Opening a file the user named as input (a trace, findings document, baseline, suppression
// list, CUDA-sanitizer log) without ever blocking: O_NONBLOCK keeps a FIFO or device from
// hanging the open, fstat after the open refuses anything but a regular file. Every failure
// is an InputFileError whose message starts with the path and says what the path is.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace streamrace::trace {

class InputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest text input (findings JSON, baseline, suppressions, sanitizer log) read whole.
inline constexpr uint64_t kMaxTextInputBytes = 1ull << 30;

// The reason an open() of `path` failed with `err`, worded for a user ("no such file or
// directory", "symbolic link loop (too many levels of symbolic links)", ...).
std::string open_error_reason(int err);

// Opens `path` read-only (blocking reads again after the open), refusing directories, FIFOs,
// sockets and devices. Returns the descriptor (the caller closes it); `size` gets the size.
int open_input_file(const std::string& path, uint64_t& size);

// The whole of a regular file, at most `max_bytes` (an InputFileError beyond that).
std::string read_input_file(const std::string& path, uint64_t max_bytes = kMaxTextInputBytes);

}  // namespace streamrace::trace
