// The finding classes and the choice of the source frame a report points at.
#include "report/finding_class.h"

#include <fmt/format.h>

#include <filesystem>

namespace streamrace::report {

using analysis::Confidence;
using analysis::RaceKind;

namespace {

constexpr const char* kPossibleNote =
    " Reported as possible: at least one access is known only approximately (a kernel's pointer "
    "argument without its extent or direction, or an imported CUDA-sanitizer report that works from "
    "operator schemas); precise mode records the exact bytes and confirms or clears it.";

const std::vector<FindingClass> kClasses = {
    {"SR1001", "CrossStreamWriteAfterRead", RaceKind::kWriteAfterRead, Confidence::kCertain,
     "Cross-stream write after read",
     "A stream writes bytes that another stream reads, and no event wait, stream wait or host "
     "synchronisation orders the write after the read: the reader may see the new data. This is the "
     "DeepSpeed overlap_comm bug shape: the compute stream refills a buffer that a collective on the "
     "communication stream is still reading."},
    {"SR1002", "CrossStreamWriteAfterWrite", RaceKind::kWriteAfterWrite, Confidence::kCertain,
     "Cross-stream write after write",
     "Two streams write overlapping bytes and nothing orders one write after the other: which value "
     "remains depends on timing."},
    {"SR1003", "CrossStreamReadAfterWrite", RaceKind::kReadAfterWrite, Confidence::kCertain,
     "Cross-stream read after write",
     "A stream reads bytes that another stream writes, and nothing orders the read after the write: "
     "the reader may see old or partly written data."},
    {"SR2001", "PossibleCrossStreamWriteAfterRead", RaceKind::kWriteAfterRead, Confidence::kPossible,
     "Possible cross-stream write after read", nullptr},
    {"SR2002", "PossibleCrossStreamWriteAfterWrite", RaceKind::kWriteAfterWrite, Confidence::kPossible,
     "Possible cross-stream write after write", nullptr},
    {"SR2003", "PossibleCrossStreamReadAfterWrite", RaceKind::kReadAfterWrite, Confidence::kPossible,
     "Possible cross-stream read after write", nullptr},
    // --host-accesses (docs/host-accesses.md).
    {"SR1004", "HostWriteDuringCopy", RaceKind::kHostWriteDuringCopy, Confidence::kCertain,
     "Host write to pinned memory during an async copy",
     "The host writes pinned memory that an asynchronous copy still reads (its source) or writes (its "
     "destination), before any host synchronisation ordered the host after the copy: the device may copy "
     "the new data, a mix of old and new, or overwrite what the host wrote. The classic shape: "
     "pin_memory() and .to(device, non_blocking=True), then refilling the pinned buffer for the next batch."},
    {"SR1005", "HostReadDuringCopy", RaceKind::kHostReadDuringCopy, Confidence::kCertain,
     "Host read of a device-to-host copy's destination before it completed",
     "The host reads pinned memory that an asynchronous device-to-host copy is still writing, before any "
     "host synchronisation ordered the host after the copy: it may see old or partly copied data."},
    {"SR2004", "PossibleHostWriteDuringCopy", RaceKind::kHostWriteDuringCopy, Confidence::kPossible,
     "Possible host write to pinned memory during an async copy", nullptr},
    {"SR2005", "PossibleHostReadDuringCopy", RaceKind::kHostReadDuringCopy, Confidence::kPossible,
     "Possible host read of a device-to-host copy's destination before it completed", nullptr},
};

constexpr const char* kPossibleHostNote =
    " Reported as possible: the host access is known only by its page, or only that it read or wrote it "
    "(the fault gave no exact address or direction).";

// Possible classes share the certain ones' text plus a note; built once.
const std::vector<FindingClass>& classes() {
  static const std::vector<FindingClass> all = [] {
    static std::string possible_text[5];
    auto v = kClasses;
    for (int i = 0; i < 3; ++i) {
      possible_text[i] = std::string(v[i].description) + kPossibleNote;
      v[i + 3].description = possible_text[i].c_str();
    }
    for (int i = 0; i < 2; ++i) {
      possible_text[3 + i] = std::string(v[6 + i].description) + kPossibleHostNote;
      v[8 + i].description = possible_text[3 + i].c_str();
    }
    return v;
  }();
  return all;
}

bool in_installed_package(const std::string& file) {
  return file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos ||
         file.rfind("<frozen ", 0) == 0;
}

}  // namespace

const std::vector<FindingClass>& finding_classes() { return classes(); }

size_t finding_class_index(const analysis::Finding& f) {
  if (f.kind == RaceKind::kHostWriteDuringCopy || f.kind == RaceKind::kHostReadDuringCopy)
    return (f.kind == RaceKind::kHostWriteDuringCopy ? 6 : 7) + (f.confidence == Confidence::kCertain ? 0 : 2);
  size_t kind = f.kind == RaceKind::kWriteAfterRead ? 0 : f.kind == RaceKind::kWriteAfterWrite ? 1 : 2;
  return kind + (f.confidence == Confidence::kCertain ? 0 : 3);
}

const FindingClass& finding_class(const analysis::Finding& f) { return classes()[finding_class_index(f)]; }

std::string verb(const std::string& direction) {
  if (direction == "read") return "reads";
  if (direction == "write") return "writes";
  if (direction == "read or write") return "reads or writes";
  if (direction == "read and write") return "reads and writes";
  return direction.empty() ? "accesses" : direction;
}

std::string headline(const analysis::Finding& f) {
  std::string bytes = f.overlap_bytes ? fmt::format("{} byte{}", f.overlap_bytes, f.overlap_bytes == 1 ? "" : "s")
                                      : std::string("memory");
  return fmt::format("{}{} race: {} on {} {} {} that {} on {} {}", f.confidence == Confidence::kPossible ? "possible " : "",
                     analysis::to_string(f.kind), f.later.op, f.later.stream_label, verb(f.later.direction), bytes,
                     f.earlier.op, f.earlier.stream_label, verb(f.earlier.direction));
}

std::string relative_source_path(const std::string& path, const std::string& root) {
  if (root.empty() || path.empty()) return {};
  namespace fs = std::filesystem;
  fs::path p = fs::path(path).lexically_normal();
  std::string root_dir = root;
  while (root_dir.size() > 1 && root_dir.back() == '/') root_dir.pop_back();
  fs::path r = fs::path(root_dir).lexically_normal();
  if (p.is_absolute() != r.is_absolute()) return {};
  auto rel = p.lexically_relative(r);
  if (rel.empty()) return {};
  auto first = *rel.begin();
  if (first == "..") return {};
  if (rel == ".") return {};
  return rel.generic_string();
}

std::string source_uri_path(const std::string& path, const std::string& root) {
  if (root.empty() || path.empty()) return {};
  if (path.front() != '/') {
    // Relative frames are relative to the traced process's working directory, which is the
    // source root in the usual `cd repo && streamrace run ...`; "<string>" and the like are no files.
    if (path.front() == '<') return {};
    auto p = std::filesystem::path(path).lexically_normal();
    if (p.empty() || *p.begin() == "..") return {};
    return p.generic_string();
  }
  return relative_source_path(path, root);
}

const analysis::Frame* primary_frame(const analysis::Access& a, const std::string& root) {
  if (a.stack.empty()) return nullptr;
  for (const auto& f : a.stack)
    if (!root.empty() && !source_uri_path(f.file, root).empty() && !in_installed_package(f.file)) return &f;
  for (const auto& f : a.stack)
    if (f.python && !in_installed_package(f.file)) return &f;
  for (const auto& f : a.stack)
    if (f.python) return &f;
  return &a.stack.front();
}

}  // namespace streamrace::report
