// Safe output files: temporary file + rename, symlinks refused unless forced.
#include "report/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace streamrace::report {

namespace {

namespace fs = std::filesystem;

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string link_target(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return "?";
  return std::string(buf, size_t(n));
}

[[noreturn]] void refuse_link(const std::string& path, const char* what, const OutputOptions& opts) {
  throw OutputError(path + ": is a symbolic link (to " + link_target(path) + "); refusing to write " + what +
                    " through it (" + opts.force_flag + " writes to what it points to)");
}

// The path to write: `path` itself, or where its symlink leads when following is allowed.
std::string resolve(const std::string& path, const OutputOptions& opts) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return path;
  if (!S_ISLNK(st.st_mode)) return path;
  if (!opts.follow_symlink) refuse_link(path, "the output", opts);
  // Follow the whole chain; a dangling link names the file to create.
  std::string cur = path;
  for (int hops = 0; hops < 40; ++hops) {
    if (::lstat(cur.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    std::string t = link_target(cur);
    cur = t.starts_with('/') ? t : (fs::path(cur).parent_path() / t).string();
  }
  throw OutputError(path + ": symbolic link loop (too many levels of symbolic links)");
}

}  // namespace

void write_output_file(const std::string& requested, std::string_view content, const OutputOptions& opts) {
  const std::string path = resolve(strip_trailing_slashes(requested), opts);
  struct stat st{};
  mode_t mode = 0;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw OutputError(requested + ": is a directory; cannot write the output there");
    if (!S_ISREG(st.st_mode)) throw OutputError(requested + ": exists and is not a regular file; refusing to replace it");
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  fs::path target(path);
  std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string tmpl = (fs::path(dir) / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);  // O_CREAT|O_EXCL: never an existing file or link
  if (fd < 0)
    throw OutputError(requested + ": cannot create a temporary file in " + dir + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw OutputError(requested + ": " + what + ": " + std::strerror(err));
  };
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed");
    p += n;
    left -= size_t(n);
  }
  if (::fchmod(fd, mode) != 0) fail("cannot set the file mode");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    throw OutputError(requested + ": write failed: " + std::strerror(err));
  }
  // rename() replaces the directory entry itself: a symlink put there meanwhile is replaced,
  // never followed.
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    throw OutputError(requested + ": cannot replace the file: " + std::strerror(err));
  }
}

void check_output_directory(const std::string& requested, const OutputOptions& opts) {
  const std::string path = strip_trailing_slashes(requested);
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && !opts.follow_symlink)
    refuse_link(path, "traces", opts);
}

}  // namespace streamrace::report
