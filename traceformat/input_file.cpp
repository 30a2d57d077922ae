// Opening input files without blocking, refusing what is not a regular file.
#include "traceformat/input_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace streamrace::trace {

std::string open_error_reason(int err) {
  switch (err) {
    case ENOENT: return "no such file or directory";
    case ELOOP: return "symbolic link loop (too many levels of symbolic links)";
    case EACCES: return "permission denied";
    default: return std::strerror(err);
  }
}

namespace {

const char* file_type_name(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

}  // namespace

int open_input_file(const std::string& path, uint64_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    // A directory opens fine read-only; EISDIR etc. come from odd file systems.
    throw InputFileError(path + ": cannot open: " + open_error_reason(err));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw InputFileError(path + ": cannot open: " + open_error_reason(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputFileError(path + ": is " + file_type_name(st.st_mode) + ", not a regular file");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  size = uint64_t(st.st_size);
  return fd;
}

std::string read_input_file(const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  int fd = open_input_file(path, size);
  if (size > max_bytes) {
    ::close(fd);
    throw InputFileError(path + ": file of " + std::to_string(size) + " bytes exceeds the limit of " +
                         std::to_string(max_bytes) + " bytes for this input");
  }
  std::string out;
  out.resize(size_t(size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw InputFileError(path + ": read failed: " + open_error_reason(err));
    }
    if (n == 0) break;  // the file shrank while reading
    got += size_t(n);
  }
  out.resize(got);
  ::close(fd);
  return out;
}

}  // namespace streamrace::trace
