// Trace file encoding: header, chunk framing, checksums, zstd, salvage of truncated files.
#include "traceformat/trace_file.h"

#include "traceformat/input_file.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <climits>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

namespace streamrace::trace {

namespace {

struct FileHeaderFixed {
  char magic[8];
  uint16_t major;
  uint16_t minor;
  uint32_t body_size;
};
static_assert(sizeof(FileHeaderFixed) == 16);

struct ChunkHeader {
  uint32_t magic;
  uint32_t flags;
  uint32_t stored_size;
  uint32_t raw_size;
  uint32_t records;
  uint32_t crc;  // over flags..records and the stored bytes
};
static_assert(sizeof(ChunkHeader) == 24);

uint32_t chunk_crc(const ChunkHeader& h, const uint8_t* stored) {
  uint32_t c = checksum(&h.flags, sizeof(uint32_t) * 4);
  return checksum(stored, h.stored_size, c);
}

void put_kv(std::vector<uint8_t>& out, std::string_view k, std::string_view v) {
  uint16_t kl = uint16_t(k.size());
  uint32_t vl = uint32_t(v.size());
  auto put = [&](const void* p, size_t n) {
    auto b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  put(&kl, 2);
  put(k.data(), k.size());
  put(&vl, 4);
  put(v.data(), v.size());
}

// A fuzzing build (tests/fuzz/) reads past bad checksums so that mutated inputs reach the
// decoder and the analyzer instead of all stopping at the CRC.
constexpr bool verify_checksums() {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  return false;
#else
  return true;
#endif
}

}  // namespace

uint32_t checksum(const void* data, size_t size, uint32_t seed) {
  if (size == 0) return seed;  // zlib answers a null buffer with the initial value instead
  return uint32_t(crc32_z(seed, static_cast<const Bytef*>(data), size));
}

const char* record_kind_name(RecordKind kind) {
  switch (kind) {
    case RecordKind::kStringDef: return "StringDef";
    case RecordKind::kStackDef: return "StackDef";
    case RecordKind::kStreamCreate: return "StreamCreate";
    case RecordKind::kStreamDestroy: return "StreamDestroy";
    case RecordKind::kEventCreate: return "EventCreate";
    case RecordKind::kEventDestroy: return "EventDestroy";
    case RecordKind::kEventRecord: return "EventRecord";
    case RecordKind::kStreamWaitEvent: return "StreamWaitEvent";
    case RecordKind::kEventSynchronize: return "EventSynchronize";
    case RecordKind::kEventQuery: return "EventQuery";
    case RecordKind::kStreamSynchronize: return "StreamSynchronize";
    case RecordKind::kStreamQuery: return "StreamQuery";
    case RecordKind::kDeviceSynchronize: return "DeviceSynchronize";
    case RecordKind::kKernelLaunch: return "KernelLaunch";
    case RecordKind::kMemcpy: return "Memcpy";
    case RecordKind::kMemset: return "Memset";
    case RecordKind::kKernelAccess: return "KernelAccess";
    case RecordKind::kHostAccess: return "HostAccess";
    case RecordKind::kKernelNodeAccess: return "KernelNodeAccess";
    case RecordKind::kAlloc: return "Alloc";
    case RecordKind::kFree: return "Free";
    case RecordKind::kAllocatorBlock: return "AllocatorBlock";
    case RecordKind::kNcclCommInit: return "NcclCommInit";
    case RecordKind::kNcclCall: return "NcclCall";
    case RecordKind::kNcclGroupStart: return "NcclGroupStart";
    case RecordKind::kNcclGroupEnd: return "NcclGroupEnd";
    case RecordKind::kGraphLaunch: return "GraphLaunch";
    case RecordKind::kStreamCapture: return "StreamCapture";
    case RecordKind::kGraphCall: return "GraphCall";
    case RecordKind::kGraphEdit: return "GraphEdit";
    case RecordKind::kOpTiming: return "OpTiming";
    case RecordKind::kNotice: return "Notice";
    case RecordKind::kCaptureMark: return "CaptureMark";
  }
  return "Unknown";
}

const char* block_action_name(BlockAction a) {
  switch (a) {
    case BlockAction::kAlloc: return "alloc";
    case BlockAction::kFreeRequested: return "free_requested";
    case BlockAction::kFreeCompleted: return "free_completed";
    case BlockAction::kSegmentAlloc: return "segment_alloc";
    case BlockAction::kSegmentFree: return "segment_free";
    case BlockAction::kSegmentMap: return "segment_map";
    case BlockAction::kSegmentUnmap: return "segment_unmap";
  }
  return "unknown";
}

const char* nccl_op_name(NcclOp op) {
  switch (op) {
    case NcclOp::kAllReduce: return "ncclAllReduce";
    case NcclOp::kBroadcast: return "ncclBroadcast";
    case NcclOp::kReduce: return "ncclReduce";
    case NcclOp::kReduceScatter: return "ncclReduceScatter";
    case NcclOp::kAllGather: return "ncclAllGather";
    case NcclOp::kAlltoAll: return "ncclAlltoAll";
    case NcclOp::kGather: return "ncclGather";
    case NcclOp::kScatter: return "ncclScatter";
    case NcclOp::kSend: return "ncclSend";
    case NcclOp::kRecv: return "ncclRecv";
  }
  return "nccl(unknown)";
}

uint32_t nccl_type_size(NcclType t) {
  switch (t) {
    case NcclType::kInt8: case NcclType::kUint8:
    case NcclType::kFloat8e4m3: case NcclType::kFloat8e5m2: return 1;
    case NcclType::kFloat16: case NcclType::kBfloat16: return 2;
    case NcclType::kInt32: case NcclType::kUint32: case NcclType::kFloat32: return 4;
    case NcclType::kInt64: case NcclType::kUint64: case NcclType::kFloat64: return 8;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// ChunkBuilder

void ChunkBuilder::add_raw(RecordKind kind, const void* fixed, size_t fixed_size, const void* tail,
                           size_t tail_size) {
  size_t body = fixed_size + tail_size;
  if (body > 0xFFFF) {  // the only variable parts are strings and lists; cut, never overflow
    tail_size = 0xFFFF - fixed_size;
    body = 0xFFFF;
  }
  RecordPrefix p{uint16_t(kind), uint16_t(body)};
  size_t at = buf_.size();
  buf_.resize(at + sizeof(p) + body);
  std::memcpy(buf_.data() + at, &p, sizeof(p));
  if (fixed_size) std::memcpy(buf_.data() + at + sizeof(p), fixed, fixed_size);
  if (tail_size) std::memcpy(buf_.data() + at + sizeof(p) + fixed_size, tail, tail_size);
  ++records_;
}

void ChunkBuilder::add_string(uint32_t id, std::string_view text) {
  StringDefHead h{id};
  add_raw(RecordKind::kStringDef, &h, sizeof(h), text.data(), text.size());
}

void ChunkBuilder::add_stack(uint32_t id, std::span<const StackFrame> frames) {
  size_t n = std::min<size_t>(frames.size(), (0xFFFF - sizeof(StackDefHead)) / sizeof(StackFrame));
  StackDefHead h{id, uint16_t(n), 0};
  add_raw(RecordKind::kStackDef, &h, sizeof(h), frames.data(), n * sizeof(StackFrame));
}

void ChunkBuilder::add_kernel(const KernelLaunchHead& head, std::span<const uint64_t> ptrs) {
  KernelLaunchHead h = head;
  size_t n = std::min<size_t>(ptrs.size(), (0xFFFF - sizeof(KernelLaunchHead)) / sizeof(uint64_t));
  h.nptrs = uint32_t(n);
  add_raw(RecordKind::kKernelLaunch, &h, sizeof(h), ptrs.data(), n * sizeof(uint64_t));
}

void ChunkBuilder::add_notice(NoticeLevel level, std::string_view text) {
  NoticeHead h{level};
  add_raw(RecordKind::kNotice, &h, sizeof(h), text.data(), text.size());
}

void ChunkBuilder::append_to(ChunkBuilder& into) const {
  into.buf_.insert(into.buf_.end(), buf_.begin(), buf_.end());
  into.records_ += records_;
}

// ---------------------------------------------------------------------------------------
// TraceWriter

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& header, WriterOptions opts)
    : path_(path), opts_(opts) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw TraceError(path + ": cannot create trace file: " + std::strerror(errno));
  write_header(header);
}

TraceWriter::TraceWriter(int fd, const std::string& name, const TraceHeader& header, WriterOptions opts)
    : fd_(fd), path_(name), opts_(opts) {
  write_header(header);
}

TraceWriter::~TraceWriter() {
  try {
    close();
  } catch (...) {
  }
}

void TraceWriter::write_all(const void* data, size_t size) {
  auto p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw TraceError(path_ + ": write failed: " + std::strerror(errno));
    }
    p += n;
    size -= size_t(n);
    offset_ += uint64_t(n);
  }
}

void TraceWriter::write_all_gathered(std::vector<iovec>& v) {
  size_t at = 0;
  while (at < v.size()) {
    if (v[at].iov_len == 0) {
      ++at;
      continue;
    }
    const int count = int(std::min<size_t>(v.size() - at, IOV_MAX));
    ssize_t n = ::writev(fd_, v.data() + at, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw TraceError(path_ + ": write failed: " + std::strerror(errno));
    }
    offset_ += uint64_t(n);
    // Past what went out (all of it, or a short write): go on from there.
    for (size_t done = size_t(n); done > 0 && at < v.size();) {
      const size_t take = std::min(done, v[at].iov_len);
      v[at].iov_base = static_cast<uint8_t*>(v[at].iov_base) + take;
      v[at].iov_len -= take;
      done -= take;
      if (v[at].iov_len == 0) ++at;
    }
  }
}

void TraceWriter::write_header(const TraceHeader& h) {
  std::vector<uint8_t> body;
  put_kv(body, "producer", h.producer);
  put_kv(body, "host", h.host);
  put_kv(body, "pid", std::to_string(h.pid));
  put_kv(body, "rank", std::to_string(h.rank));
  put_kv(body, "devices", h.devices);
  put_kv(body, "driver_version", h.driver_version);
  put_kv(body, "cuda_version", h.cuda_version);
  put_kv(body, "cupti_version", h.cupti_version);
  put_kv(body, "nccl_version", h.nccl_version);
  put_kv(body, "clock_source", h.clock_source);
  put_kv(body, "capture_status", h.capture_status);
  put_kv(body, "mode", h.mode);
  put_kv(body, "command", h.command);
  for (const auto& [k, v] : h.extra) put_kv(body, k, v);
  FileHeaderFixed f{};
  std::memcpy(f.magic, kFileMagic, sizeof(f.magic));
  f.major = kVersionMajor;
  f.minor = kVersionMinor;
  f.body_size = uint32_t(body.size());
  uint32_t crc = checksum(body.data(), body.size(), checksum(&f, sizeof(f)));
  write_all(&f, sizeof(f));
  write_all(body.data(), body.size());
  write_all(&crc, sizeof(crc));
}

void ZstdContextFree::operator()(ZSTD_CCtx_s* c) const { ZSTD_freeCCtx(c); }
void ZstdContextFree::operator()(ZSTD_DCtx_s* d) const { ZSTD_freeDCtx(d); }

void TraceWriter::write_framed(uint32_t flags, std::span<const uint8_t> raw, uint32_t records) {
  std::span<const uint8_t> stored = raw;
  if (opts_.compress && !raw.empty()) {
    if (!cctx_) cctx_.reset(ZSTD_createCCtx());
    // Sized exactly, never doubled (its old bytes are not needed): a chunk a little larger
    // than the last would otherwise leave it twice the size it needs.
    const size_t need = sizeof(ChunkHeader) + ZSTD_compressBound(raw.size());
    // Left uninitialised: zstd writes only the compressed bytes (a tenth of the bound, say),
    // so only their pages are ever touched; zeroing the bound would touch all of them.
    if (scratch_bytes_ < need) {
      scratch_.reset();
      scratch_.reset(new uint8_t[need]);
      scratch_bytes_ = need;
    }
    uint8_t* dst = scratch_.get() + sizeof(ChunkHeader);
    const size_t cap = scratch_bytes_ - sizeof(ChunkHeader);
    size_t n = cctx_ ? ZSTD_compressCCtx(cctx_.get(), dst, cap, raw.data(), raw.size(), opts_.zstd_level)
                     : ZSTD_compress(dst, cap, raw.data(), raw.size(), opts_.zstd_level);
    if (!ZSTD_isError(n) && n < raw.size()) {
      stored = std::span<const uint8_t>(dst, n);
      flags |= kChunkZstd;
    }
  }
  ChunkHeader h{kChunkMagic, flags, uint32_t(stored.size()), uint32_t(raw.size()), records, 0};
  h.crc = chunk_crc(h, stored.data());
  if (flags & kChunkZstd) {
    // The header goes into the room before the compressed bytes: one write, no copy.
    std::memcpy(scratch_.get(), &h, sizeof(h));
    write_all(scratch_.get(), sizeof(h) + stored.size());
    return;
  }
  // One write per chunk keeps a concurrent kill from leaving a header without its payload
  // more often than necessary; the reader copes with that case anyway. Gathered from the
  // header and the caller's payload: a stored chunk is as large as its records (a megabyte),
  // and copying it behind the header touched that much fresh memory again.
  std::vector<iovec> v = {{&h, sizeof(h)}, {const_cast<uint8_t*>(stored.data()), stored.size()}};
  write_all_gathered(v);
}

void TraceWriter::write_chunk(const ChunkBuilder& chunk) {
  if (fd_ < 0 || marked_) throw TraceError(path_ + (marked_ ? ": write after the end-of-trace marker" : ": write after close"));
  if (chunk.empty()) return;
  if (chunk.bytes() > kMaxChunkBytes) throw TraceError(path_ + ": chunk larger than the format allows");
  write_framed(0, chunk.payload(), chunk.records());
}

void TraceWriter::write_chunk(std::span<const std::span<const uint8_t>> pieces, uint32_t records) {
  if (fd_ < 0 || marked_) throw TraceError(path_ + (marked_ ? ": write after the end-of-trace marker" : ": write after close"));
  if (records == 0) return;
  size_t bytes = 0;
  for (const auto& p : pieces) bytes += p.size();
  if (bytes > kMaxChunkBytes) throw TraceError(path_ + ": chunk larger than the format allows");
  if (opts_.compress || pieces.size() == 1) {
    if (pieces.size() == 1) return write_framed(0, pieces[0], records);
    gathered_.clear();
    gathered_.reserve(bytes);
    for (const auto& p : pieces) gathered_.insert(gathered_.end(), p.begin(), p.end());
    write_framed(0, gathered_, records);
    return;
  }
  ChunkHeader h{kChunkMagic, 0, uint32_t(bytes), uint32_t(bytes), records, 0};
  uint32_t crc = checksum(&h.flags, sizeof(uint32_t) * 4);
  std::vector<iovec> v;
  v.reserve(pieces.size() + 1);
  v.push_back({&h, sizeof(h)});
  for (const auto& p : pieces) {
    crc = checksum(p.data(), p.size(), crc);
    v.push_back({const_cast<uint8_t*>(p.data()), p.size()});
  }
  h.crc = crc;
  write_all_gathered(v);
}

void TraceWriter::close() {
  if (fd_ < 0) return;
  int fd = fd_;
  if (!marked_) write_framed(kChunkEndOfTrace, {}, 0);
  fd_ = -1;
  ::close(fd);
}

void TraceWriter::write_end_marker() {
  if (fd_ < 0) throw TraceError(path_ + ": write after close");
  if (marked_) return;
  before_marker_ = offset_;
  write_framed(kChunkEndOfTrace, {}, 0);
  marked_ = true;
}

void TraceWriter::remove_end_marker() {
  if (fd_ < 0 || !marked_) return;
  marked_ = false;
  if (::ftruncate(fd_, off_t(before_marker_)) != 0 || ::lseek(fd_, off_t(before_marker_), SEEK_SET) < 0) {
    // The file cannot go on. Its marker must not stay either (the trace would read as whole
    // while later records are lost): zeros over it make the file end in a damaged chunk.
    const int err = errno;
    static const uint8_t zeros[sizeof(ChunkHeader)] = {};
    (void)!::pwrite(fd_, zeros, sizeof zeros, off_t(before_marker_));
    ::close(fd_);
    fd_ = -1;
    throw TraceError(path_ + ": cannot take back the end-of-trace marker: " + std::strerror(err));
  }
  offset_ = before_marker_;
}

// ---------------------------------------------------------------------------------------
// TraceReader

TraceReader::TraceReader(const std::string& path) : path_(path) {
  int fd = -1;
  try {
    fd = open_input_file(path, file_size_);
  } catch (const InputFileError& e) {
    throw TraceError(e.what());
  }
  file_ = ::fdopen(fd, "rb");
  if (!file_) {
    int err = errno;
    ::close(fd);
    throw TraceError(path + ": cannot open: " + std::strerror(err));
  }
  try {
    read_header();
  } catch (...) {
    std::fclose(file_);
    file_ = nullptr;
    throw;
  }
}

TraceReader::~TraceReader() {
  if (file_) std::fclose(file_);
}

void TraceReader::fail(uint64_t offset, const std::string& what) const {
  throw TraceError(path_ + ": offset " + std::to_string(offset) + ": " + what);
}

size_t TraceReader::read_at_most(void* dst, size_t n) {
  size_t got = std::fread(dst, 1, n, file_);
  offset_ += got;
  return got;
}

void TraceReader::read_header() {
  if (file_size_ == 0) throw TraceError(path_ + ": empty file, not a streamrace trace");
  FileHeaderFixed f{};
  size_t got = read_at_most(&f, sizeof(f));
  if (got < sizeof(f.magic) || std::memcmp(f.magic, kFileMagic, sizeof(f.magic)) != 0)
    fail(0, "not a streamrace trace (bad magic)");
  if (got < sizeof(f)) fail(got, "file ends inside the header");
  if (f.major != kVersionMajor)
    fail(8, "unsupported trace format version " + std::to_string(f.major) + "." + std::to_string(f.minor) +
                " (this build reads " + std::to_string(kVersionMajor) + ".x)");
  if (f.body_size > kMaxHeaderBytes)
    fail(12, "header size " + std::to_string(f.body_size) + " exceeds the format's limit of " +
                 std::to_string(kMaxHeaderBytes));
  if (sizeof(f) + uint64_t(f.body_size) + 4 > file_size_)
    fail(file_size_, "file ends inside the header (its " + std::to_string(sizeof(f) + f.body_size + 4) +
                         " bytes; the file has " + std::to_string(file_size_) + ")");
  std::vector<uint8_t> body(f.body_size);
  uint32_t crc = 0;
  if (read_at_most(body.data(), body.size()) != body.size() || read_at_most(&crc, 4) != 4)
    fail(offset_, "file ends inside the header");
  if (crc != checksum(body.data(), body.size(), checksum(&f, sizeof(f))) && verify_checksums())
    fail(sizeof(f), "header checksum mismatch");
  size_t p = 0;
  auto bad = [&]() { fail(sizeof(f) + p, "malformed header field"); };
  while (p < body.size()) {
    uint16_t kl;
    uint32_t vl;
    if (p + 2 > body.size()) bad();
    std::memcpy(&kl, &body[p], 2);
    if (p + 2 + kl + 4 > body.size()) bad();
    std::string key(reinterpret_cast<const char*>(&body[p + 2]), kl);
    std::memcpy(&vl, &body[p + 2 + kl], 4);
    if (p + 6 + kl + size_t(vl) > body.size()) bad();
    std::string val(reinterpret_cast<const char*>(&body[p + 6 + kl]), vl);
    p += 6 + kl + vl;
    auto& h = header_;
    try {
      if (key == "producer") h.producer = val;
      else if (key == "host") h.host = val;
      else if (key == "pid") h.pid = std::stoll(val);
      else if (key == "rank") h.rank = std::stoi(val);
      else if (key == "devices") h.devices = val;
      else if (key == "driver_version") h.driver_version = val;
      else if (key == "cuda_version") h.cuda_version = val;
      else if (key == "cupti_version") h.cupti_version = val;
      else if (key == "nccl_version") h.nccl_version = val;
      else if (key == "clock_source") h.clock_source = val;
      else if (key == "capture_status") h.capture_status = val;
      else if (key == "mode") h.mode = val;
      else if (key == "command") h.command = val;
      else h.extra[key] = val;
    } catch (const std::exception&) {
      fail(sizeof(f), "header field '" + key + "' has a bad value '" + val + "'");
    }
  }
}

bool TraceReader::next_chunk(const std::function<void(const RecordView&)>& fn) {
  if (done_) return false;
  uint64_t chunk_at = offset_;
  chunk_offset_ = chunk_at;
  ChunkHeader h{};
  size_t got = read_at_most(&h, sizeof(h));
  if (got == 0) {
    done_ = true;
    stats_.valid_bytes = chunk_at;
    if (!stats_.complete)
      warnings_.push_back(path_ + ": no end-of-trace marker after " + std::to_string(stats_.chunks) +
                          " chunks (the traced process did not exit cleanly?); analysing what was written");
    return false;
  }
  auto truncated = [&]() {
    done_ = true;
    stats_.truncated = true;
    stats_.valid_bytes = chunk_at;
    warnings_.push_back(path_ + ": truncated at offset " + std::to_string(chunk_at) + " inside a chunk; read " +
                        std::to_string(stats_.chunks) + " whole chunks (" + std::to_string(stats_.records) +
                        " records)");
    return false;
  };
  if (got < sizeof(h)) {
    // A partial chunk header at the end of the file is a cut-off write; garbage is not.
    if (got >= 4 && h.magic != kChunkMagic) fail(chunk_at, "bad chunk magic (corrupt file?)");
    return truncated();
  }
  if (h.magic != kChunkMagic) fail(chunk_at, "bad chunk magic (corrupt file?)");
  if (h.stored_size > kMaxChunkBytes || h.raw_size > kMaxChunkBytes)
    fail(chunk_at, "chunk size " + std::to_string(h.stored_size) + "/" + std::to_string(h.raw_size) +
                       " exceeds the format's limit");
  if ((h.flags & kChunkZstd) && uint64_t(h.raw_size) > uint64_t(kMaxCompressionRatio) * h.stored_size)
    fail(chunk_at, "chunk raw size " + std::to_string(h.raw_size) + " is more than " +
                       std::to_string(kMaxCompressionRatio) + " times its stored size " + std::to_string(h.stored_size) +
                       " (the format's limit)");
  if (h.records > h.raw_size / sizeof(RecordPrefix))
    fail(chunk_at, "chunk record count " + std::to_string(h.records) + " exceeds what its " +
                       std::to_string(h.raw_size) + " bytes can hold (" + std::to_string(h.raw_size / sizeof(RecordPrefix)) +
                       ")");
  if (chunk_at + sizeof(h) + h.stored_size > file_size_) return truncated();
  // The buffers are sized exactly when they grow, never doubled (their old bytes are not needed).
  auto fit = [](std::vector<uint8_t>& v, size_t n) {
    if (v.capacity() < n) std::vector<uint8_t>().swap(v);
    v.resize(n);
  };
  fit(stored_, h.stored_size);
  if (read_at_most(stored_.data(), h.stored_size) != h.stored_size) return truncated();
  if (chunk_crc(h, stored_.data()) != h.crc && verify_checksums()) fail(chunk_at, "chunk checksum mismatch (corrupt file)");
  if (h.flags & kChunkEndOfTrace) stats_.complete = true;
  const std::vector<uint8_t>* raw = &stored_;
  if (h.flags & kChunkZstd) {
    fit(raw_, h.raw_size);
    if (!dctx_) dctx_.reset(ZSTD_createDCtx());
    size_t n = dctx_ ? ZSTD_decompressDCtx(dctx_.get(), raw_.data(), raw_.size(), stored_.data(), stored_.size())
                     : ZSTD_decompress(raw_.data(), raw_.size(), stored_.data(), stored_.size());
    if (ZSTD_isError(n) || n != h.raw_size)
      fail(chunk_at, std::string("cannot decompress chunk: ") +
                         (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
    raw = &raw_;
  } else if (h.raw_size != h.stored_size) {
    fail(chunk_at, "uncompressed chunk with differing sizes");
  }
  const std::optional<uint32_t> framed = for_each_framed_record(*raw, fn);
  if (!framed) fail(chunk_at, "record framing runs past the chunk");
  const uint32_t n = *framed;
  if (n != h.records) fail(chunk_at, "chunk says " + std::to_string(h.records) + " records, holds " + std::to_string(n));
  ++stats_.chunks;
  stats_.records += n;
  stats_.valid_bytes = offset_;
  return true;
}

std::optional<uint32_t> for_each_framed_record(std::span<const uint8_t> payload,
                                               const std::function<void(const RecordView&)>& fn) {
  const uint8_t* p = payload.data();
  size_t left = payload.size();
  uint32_t n = 0;
  while (left > 0) {
    RecordPrefix rp;
    if (left < sizeof(rp)) return std::nullopt;
    std::memcpy(&rp, p, sizeof(rp));
    if (left - sizeof(rp) < rp.body_size) return std::nullopt;
    fn(RecordView{RecordKind(rp.kind), std::span<const uint8_t>(p + sizeof(rp), rp.body_size)});
    p += sizeof(rp) + rp.body_size;
    left -= sizeof(rp) + rp.body_size;
    ++n;
  }
  return n;
}

void TraceReader::for_each(const std::function<void(const RecordView&)>& fn) {
  while (next_chunk(fn)) {
  }
}

}  // namespace streamrace::trace
