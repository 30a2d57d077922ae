// Writes the fuzz target's seed corpus (small well-formed traces, uncompressed so mutations
// reach the records) and one regression input per byte-level input class of issue #13.
//   fuzz_corpus_writer CORPUS_DIR REGRESSIONS_DIR
#include <filesystem>
#include <iostream>

#include "cli/hostile_inputs.h"

using namespace streamrace;
namespace hostile = testing::hostile;
using trace::TraceBuilder;

namespace {

TraceBuilder plain(const std::string& path) { return TraceBuilder(path, TraceBuilder::default_header(0), {false, 1}); }

void seeds(const std::string& dir) {
  {  // two streams write one buffer unordered; an event orders a second pair
    auto b = plain(dir + "/memsets_and_event.srace");
    uint64_t s1 = b.create_stream(), s2 = b.create_stream(trace::kStreamNonBlocking, 0, -1);
    uint64_t e = b.create_event();
    uint64_t p = b.alloc(1 << 16);
    b.at("train.py", 10, "step").memset(s1, p, 4096);
    b.memset(s2, p, 4096);
    b.record_event(e, s1);
    b.wait_event(s2, e);
    b.memcpy(s2, p + 8192, p, 1024);
    b.event_synchronize(e);
    b.stream_synchronize(s1);
    b.finish();
  }
  {  // kernels with pointer arguments, the legacy stream, a free
    auto b = plain(dir + "/kernels_legacy_free.srace");
    uint64_t s = b.create_stream(0);
    uint64_t p = b.alloc(1 << 20), q = b.alloc(1 << 12, trace::AllocKind::kAsync, s);
    b.kernel(s, "void scale<float>(float const*, float*, int)", {p, p + 256});
    b.kernel(trace::legacy_stream(0), "fill(float*)", {p});
    b.memset(s, q, 64);
    b.free(q, trace::AllocKind::kAsync, s);
    b.device_synchronize();
    b.free(p);
    b.timing(1, 2'000'000, 2'100'000);
    b.notice(trace::NoticeLevel::kWarning, "a notice");
    b.finish();
  }
  {  // NCCL: a communicator, an all-reduce against a copy, a group
    auto b = plain(dir + "/nccl_group.srace");
    uint64_t comm = b.comm_init(0, 2);
    uint64_t s1 = b.create_stream(), s2 = b.create_stream();
    uint64_t p = b.alloc(1 << 16);
    b.nccl(trace::NcclOp::kAllReduce, s2, comm, p, p, 1024);
    b.memcpy(s1, p, p + 8192, 4096);
    b.group_start();
    b.nccl(trace::NcclOp::kSend, s1, comm, p, 0, 16, trace::NcclType::kFloat16, 1);
    b.nccl(trace::NcclOp::kRecv, s2, comm, 0, p + 4096, 16, trace::NcclType::kFloat16, 1);
    b.group_end();
    b.graph_launch(s1);
    b.capture(s2, true);
    b.memset(s2, p, 16);
    b.capture(s2, false);
    b.finish();
  }
  {  // the explicit graph API: nodes of each kind, edges, a child, a clone, an exec update
    auto b = plain(dir + "/explicit_graph.srace");
    uint64_t s1 = b.create_stream(), s2 = b.create_stream();
    uint64_t e = b.create_event();
    uint64_t p = b.alloc(1 << 16);
    using A = trace::GraphEditAction;
    using T = trace::GraphNodeType;
    TraceBuilder::NodeWork k, c, m;
    k.kernel = "fill(float*)";
    k.ptrs = {p};
    c.dst = p + 4096;
    c.src = p;
    c.bytes = 1024;
    m.dst = p;
    m.bytes = 512;
    b.graph_create(0x6b01);
    b.graph_node(A::kAddNode, 0x6b01, 0x6e10, T::kMemset, {}, 0, 0, &m);
    b.graph_create(0x6b00);
    b.graph_node(A::kAddNode, 0x6b00, 0x6e00, T::kKernel, {}, 0, 0, &k);
    b.graph_node(A::kAddNode, 0x6b00, 0x6e01, T::kMemcpy, {0x6e00}, 0, 0, &c);
    b.graph_node(A::kAddNode, 0x6b00, 0x6e02, T::kChildGraph, {}, 0x6b01);
    b.graph_node(A::kAddNode, 0x6b00, 0x6e03, T::kEventRecord, {0x6e01, 0x6e02}, e);
    b.graph_node(A::kAddNode, 0x6b00, 0x6e04, T::kEventWait, {}, e);
    b.graph_node(A::kAddNode, 0x6b00, 0x6e05, T::kHost, {0x6e04});
    b.graph_edges(A::kAddEdges, 0x6b00, {0x6e05}, {0x6e02});
    b.graph_edges(A::kRemoveEdges, 0x6b00, {0x6e00}, {0x6e01});
    b.graph_clone(0x6b02, 0x6b00);
    b.graph_call(trace::GraphAction::kInstantiate, 0x6b00, 0x6a00);
    b.graph_node(A::kExecSetNode, 0x6a00, 0x6e01, T::kMemcpy, {}, 0, 0, &c);
    b.graph_launch(s1, 0x6a00);
    b.record_event(e, s1);
    b.wait_event(s2, e);
    b.graph_destroy_node(0x6e05);
    b.graph_call(trace::GraphAction::kExecUpdate, 0x6b02, 0x6a00);
    b.graph_launch(s2, 0x6a00);
    b.instantiate(0x6b02, 0x6a01, trace::kGraphDeviceLaunch);
    b.finish();
  }
  {  // precise mode: measured intervals for a patched launch
    auto h = TraceBuilder::default_header(0);
    h.mode = "precise";
    TraceBuilder b(dir + "/precise.srace", h, {false, 1});
    uint64_t s1 = b.create_stream(), s2 = b.create_stream();
    uint64_t p = b.alloc(1 << 16);
    uint64_t c = b.kernel(s1, "k(float*)", {p}, 0, trace::kKernelArgsScanned | trace::kKernelPrecise);
    b.kernel_access(c, p, 256, trace::AccessDir::kWrite);
    b.kernel_access(c, p + 512, 64, trace::AccessDir::kRead, true);
    b.memset(s2, p, 128);
    b.finish();
  }
  {  // --host-accesses: host accesses against async pinned copies, at the address space's edges too
    TraceBuilder b(dir + "/host_accesses.srace", TraceBuilder::default_header(0), {false, 1});
    uint64_t s = b.create_stream();
    uint64_t host = b.alloc(8192, trace::AllocKind::kHostPinned), dev = b.alloc(8192);
    b.memcpy(s, dev, host, 8192, trace::CopyKind::kHostToDevice, true, trace::MemKind::kPinnedHost, trace::MemKind::kDevice);
    b.host_access(host + 100, trace::AccessDir::kWrite);
    b.memcpy(s, host, dev, 8192, trace::CopyKind::kDeviceToHost, true, trace::MemKind::kDevice, trace::MemKind::kPinnedHost);
    b.host_access(host + 8, trace::AccessDir::kRead);
    b.host_access(host + 4096, trace::AccessDir::kReadWrite, 4096, false);
    b.host_access(~0ull, trace::AccessDir::kWrite);
    b.host_access(~0ull - 10, trace::AccessDir::kReadWrite, 0xFFFF'FFFFu, false);
    b.stream_synchronize(s);
    b.host_access(host + 200, trace::AccessDir::kWrite);
    b.finish();
  }
  {  // a ring trace (1.3): a window-open mark, the snapshot, its end, a step, the last steps' race
    auto b = plain(dir + "/ring_window.srace");
    auto mark = [&](trace::CaptureAction a, uint64_t step, uint64_t dropped, uint64_t left_out) {
      b.capture_mark(a, trace::CaptureReason::kRing, step, dropped, left_out);
    };
    mark(trace::CaptureAction::kWindowOpen, 96, 96, 700);
    uint64_t s1 = b.create_stream(), s2 = b.create_stream();
    uint64_t p = b.alloc(1 << 16);
    mark(trace::CaptureAction::kStateEnd, 96, 0, 0);
    mark(trace::CaptureAction::kStep, 97, 0, 0);
    b.memset(s1, p, 4096);
    b.memcpy(s2, p + 8192, p, 4096);
    mark(trace::CaptureAction::kWindowOpen, 98, 1, 9);  // a window opened again: a barrier
    b.memset(s2, p, 64);
    mark(trace::CaptureAction::kWindowClose, 98, 0, 0);
    b.finish();
  }
}

void regressions(const std::string& dir) {
  using trace::RecordKind;
  hostile::write_chunks(dir + "/capture_mark_action_7.srace", {hostile::capture_mark(7)});
  hostile::write_chunks(dir + "/short_string.srace", {hostile::short_record(RecordKind::kStringDef, 2)});
  hostile::write_chunks(dir + "/short_notice.srace", {hostile::short_record(RecordKind::kNotice, 2)});
  hostile::write_chunks(dir + "/six_byte_stack.srace", {hostile::short_record(RecordKind::kStackDef, 6)});
  hostile::string_def(dir + "/string_id_3fffffff.srace", 0x3FFF'FFFFu);
  hostile::string_def(dir + "/string_id_40000000.srace", 0x4000'0000u);
  hostile::kernel_name_id(dir + "/kernel_name_id_fffffff0.srace", 0xFFFF'FFF0u);
  hostile::zstd_bomb(dir + "/zstd_64mib_empty_records.srace", 2);
  hostile::huge_lengths(dir + "/alloc_2p50_memset_2p56.srace");
  hostile::many_streams(dir + "/streams_5000.srace", 5000);
  std::string bytes = hostile::small_trace_bytes(dir + "/.whole");
  std::filesystem::remove(dir + "/.whole");
  hostile::write_bytes(dir + "/cut_inside_header.srace", bytes.substr(0, 100));
  hostile::write_bytes(dir + "/cut_inside_first_chunk.srace", bytes.substr(0, hostile::header_bytes(bytes) + 30));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_corpus_writer CORPUS_DIR REGRESSIONS_DIR\n";
    return 2;
  }
  for (int i = 1; i < 3; ++i) {
    std::filesystem::remove_all(argv[i]);
    std::filesystem::create_directories(argv[i]);
  }
  seeds(argv[1]);
  regressions(argv[2]);
  return 0;
}
