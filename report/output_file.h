// Writing a report, baseline or list the user named as output, safely: the bytes go to a
// fresh temporary file (O_EXCL) in the target's directory, which is then renamed over the
// target, so a reader never sees half a report and a symlink at the final component is never
// followed. An output path that is a symbolic link (dangling or not) is refused unless the
// caller forces it, and then the link's target is written (still by rename).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace streamrace::report {

class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OutputOptions {
  // Write through a symlinked output path (to the file it points to) instead of refusing.
  bool follow_symlink = false;
  // The option that sets follow_symlink, named in the refusal.
  std::string force_flag = "--force-output";
};

// Writes `content` as the whole of `path`. Throws OutputError naming the path.
void write_output_file(const std::string& path, std::string_view content, const OutputOptions& opts = {});

// Refuses (OutputError) a directory path that is a symbolic link unless `opts` follow links:
// `run -o DIR` must not send traces through a link someone else planted.
void check_output_directory(const std::string& path, const OutputOptions& opts = {});

}  // namespace streamrace::report
