// HostAccessTracker: see host_access_tracker.h.
#include "tracer/host_access_tracker.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#include "traceformat/records.h"

namespace streamrace::tracer {

namespace {

// Whether every byte of [lo, hi) is mapped readable and writable, not executable, and not the
// main thread's stack (the kernel must be able to push a signal frame there). Reads
// /proc/self/maps: allocations are rare, copies are not, so this is paid once per allocation.
bool plain_rw_mapping(uint64_t lo, uint64_t hi) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uint64_t covered = lo;
  while (covered < hi && std::getline(maps, line)) {
    unsigned long long b = 0, e = 0;
    char perms[8] = {0};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &b, &e, perms) != 3) continue;
    if (e <= covered || b >= hi) continue;
    if (b > covered) return false;  // a hole
    if (perms[0] != 'r' || perms[1] != 'w' || perms[2] != '-') return false;
    if (line.find("[stack") != std::string::npos) return false;
    covered = e;
  }
  if (covered < hi) return false;
  // Nor the calling thread's own stack, wherever it lives.
  volatile int here = 0;
  uint64_t sp = reinterpret_cast<uint64_t>(&here);
  return !(sp >= lo && sp < hi);
}

}  // namespace

HostAccessTracker::HostAccessTracker(PageGuard& guard, TraceRecorder& rec, bool native_stacks)
    : guard_(guard), rec_(&rec) {
  guard_.install(native_stacks);
  guard_.set_seq_source(&rec.seq_counter());
}

void HostAccessTracker::set_recorder(TraceRecorder& rec) {
  std::lock_guard lock(mu_);
  rec_ = &rec;
  api_write_ = api_read_ = api_unknown_ = 0;
  guard_.set_seq_source(&rec.seq_counter());
}

void HostAccessTracker::pinned_allocated(uint64_t ptr, uint64_t bytes, trace::AllocKind kind) {
  if (ptr == 0 || bytes == 0) return;
  const uint64_t page = guard_.page_bytes();
  const uint64_t end = ptr + bytes < ptr ? UINT64_MAX : ptr + bytes;
  uint64_t lo, hi;
  if (kind == trace::AllocKind::kHostPinned) {
    lo = ptr / page * page;
    hi = (end + page - 1) / page * page;
  } else {
    lo = (ptr + page - 1) / page * page;
    hi = end / page * page;
  }
  std::lock_guard lock(mu_);
  if (lo >= hi || !plain_rw_mapping(lo, hi)) {
    ++unguardable_;
    return;
  }
  regions_[ptr] = Region{ptr, bytes, lo, hi};
}

void HostAccessTracker::pinned_freeing(uint64_t ptr) {
  std::lock_guard lock(mu_);
  auto it = regions_.find(ptr);
  if (it == regions_.end()) return;
  const Region r = it->second;
  regions_.erase(it);
  end_windows_locked([](const Window& w, uint64_t lo, uint64_t hi) { return w.lo < hi && lo < w.hi; }, r.lo, r.hi);
}

void HostAccessTracker::copy_enqueued(uint64_t host, uint64_t bytes, bool device_writes, uint64_t stream) {
  if (bytes == 0) return;
  std::lock_guard lock(mu_);
  auto it = regions_.upper_bound(host);
  if (it == regions_.begin()) return;
  --it;
  const Region& r = it->second;
  if (host < r.base || host - r.base >= r.bytes) return;  // not inside a pinned allocation we know
  const uint64_t page = guard_.page_bytes();
  const uint64_t end = host + bytes < host ? UINT64_MAX : host + bytes;
  const uint64_t lo = std::max(r.lo, host / page * page);
  const uint64_t hi = std::min(r.hi, (std::min(end, r.base + r.bytes) + page - 1) / page * page);
  if (lo >= hi) return;
  // Another SIGSEGV handler replaced the guard's: faults on guarded pages would go to code that
  // does not expect them. Nothing stays guarded, nothing new is.
  if (!guard_.still_on_top()) {
    end_windows_locked([](const Window&, uint64_t, uint64_t) { return true; }, 0, 0);
    return;
  }
  // The same buffer copied again on the same stream (a loop): the new copy's window replaces
  // the old one (its pages may have been unguarded by a fault).
  for (size_t i = 0; i < windows_.size(); ++i) {
    Window& w = windows_[i];
    if (w.lo == lo && w.hi == hi && w.stream == stream && w.device_writes == device_writes) {
      guard_.release(w.id);
      windows_.erase(windows_.begin() + long(i));
      break;
    }
  }
  const uint32_t id = guard_.arm(lo, hi, device_writes ? PROT_NONE : PROT_READ, PROT_READ | PROT_WRITE);
  if (id == 0) return;
  windows_.push_back(Window{id, lo, hi, stream, ++order_, device_writes});
}

void HostAccessTracker::event_recorded(uint64_t event, uint64_t stream) {
  std::lock_guard lock(mu_);
  events_[event] = {stream, order_};
}

void HostAccessTracker::end_windows_locked(bool (*pred)(const Window&, uint64_t, uint64_t), uint64_t a, uint64_t b) {
  size_t kept = 0;
  for (size_t i = 0; i < windows_.size(); ++i) {
    if (pred(windows_[i], a, b)) {
      guard_.release(windows_[i].id);
    } else {
      windows_[kept++] = windows_[i];
    }
  }
  windows_.resize(kept);
}

void HostAccessTracker::stream_synchronized(uint64_t stream) {
  std::lock_guard lock(mu_);
  if (windows_.empty()) return;
  // The legacy default stream waits for the work of every blocking stream: all windows end
  // (possibly early for non-blocking streams, which only loses detection).
  if (trace::is_legacy_stream(stream)) {
    end_windows_locked([](const Window&, uint64_t, uint64_t) { return true; }, 0, 0);
    return;
  }
  end_windows_locked([](const Window& w, uint64_t s, uint64_t) { return w.stream == s; }, stream, 0);
}

void HostAccessTracker::event_synchronized(uint64_t event) {
  std::lock_guard lock(mu_);
  if (windows_.empty()) return;
  auto it = events_.find(event);
  if (it == events_.end()) return;  // never recorded (in this trace): orders nothing we know
  const auto [stream, order] = it->second;
  if (trace::is_legacy_stream(stream)) {
    end_windows_locked([](const Window& w, uint64_t, uint64_t o) { return w.order <= o; }, 0, order);
    return;
  }
  end_windows_locked([](const Window& w, uint64_t s, uint64_t o) { return w.stream == s && w.order <= o; }, stream,
                     order);
}

void HostAccessTracker::host_synchronized() {
  std::lock_guard lock(mu_);
  if (windows_.empty()) return;
  end_windows_locked([](const Window&, uint64_t, uint64_t) { return true; }, 0, 0);
}

size_t HostAccessTracker::open_windows() {
  std::lock_guard lock(mu_);
  return windows_.size();
}

uint32_t HostAccessTracker::thread_of(pid_t tid) {
  if (tid == pid_t(syscall(SYS_gettid))) return rec_->thread_index();
  return rec_->thread_index_of(tid);
}

void HostAccessTracker::drain() {
  if (!guard_.has_faults()) return;
  std::lock_guard lock(mu_);
  TraceRecorder& rec = *rec_;
  guard_.drain([&](const PageGuard::Fault& f) {
    uint32_t& api = f.dir == trace::AccessDir::kWrite ? api_write_ : f.dir == trace::AccessDir::kRead ? api_read_ : api_unknown_;
    if (api == 0)
      api = rec.strings().intern(f.dir == trace::AccessDir::kWrite  ? "host write"
                                 : f.dir == trace::AccessDir::kRead ? "host read"
                                                                    : "host access");
    trace::HostAccess r{};
    r.call.seq = f.seq;
    r.call.host_ts_ns = f.host_ts_ns;
    r.call.thread = thread_of(f.tid);
    r.call.stack_id = f.nframes ? rec.stacks().intern_native({f.pcs, f.nframes}) : 0;
    r.call.api_id = api;
    r.addr = f.addr;
    r.page = f.page;
    r.page_bytes = f.page_bytes;
    r.dir = f.dir;
    r.flags = f.exact_addr ? uint8_t(trace::kHostAccessExactAddr) : uint8_t(0);
    rec.add(r);
  });
}

void HostAccessTracker::finish() {
  host_synchronized();
  drain();
  // Always said, so a report shows that host accesses were watched (and how much).
  PageGuard::Counts n = guard_.counts();
  char msg[320];
  std::snprintf(msg, sizeof msg,
                "host accesses: %llu copy windows guarded, %llu not guarded (no slot or protection refused), %llu "
                "host accesses caught, %llu lost (no free slot), %llu pinned allocations left unguarded (not plain "
                "read-write pages)",
                (unsigned long long)n.armed, (unsigned long long)n.refused, (unsigned long long)n.faults,
                (unsigned long long)n.faults_dropped, (unsigned long long)unguardable_);
  rec_->add_notice(n.faults_dropped ? trace::NoticeLevel::kWarning : trace::NoticeLevel::kInfo, msg);
}

void HostAccessTracker::reset_after_fork() {
  new (&mu_) std::mutex();
  guard_.reset_after_fork();
  regions_.clear();
  windows_.clear();
  events_.clear();
  order_ = 0;
}

}  // namespace streamrace::tracer
