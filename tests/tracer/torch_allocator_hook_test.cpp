// TorchAllocatorHook against a stand-in libc10_cuda.so (fake/fake_c10_cuda.cpp) laid out as
// torch 2.11's: when it attaches, what each allocator event becomes, and when it stays out.
#include <gtest/gtest.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <generated_cuda_runtime_api_meta.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/tracer/trace_contents.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/thread_state.h"
#include "tracer/torch_allocator_hook.h"

namespace streamrace::tracer {
namespace {

using testing::read_trace;
using testing::TraceContents;
using trace::BlockAction;
using trace::RecordKind;

class NoQueries : public CudaQueries {
 public:
  uint32_t device_of_context(uint64_t) override { return 0; }
  bool param_layout(uint64_t, bool, std::vector<ParamSlot>&) override { return false; }
  trace::MemKind memory_kind(uint64_t) override { return trace::MemKind::kDevice; }
};

struct FakeTorch {
  void* lib = nullptr;
  void (*reset)(int, int, const char*) = nullptr;
  int (*trackers)() = nullptr;
  void (*emit)(int, int, uint64_t, uint64_t, void*) = nullptr;
  static FakeTorch& get() {
    static FakeTorch f = [] {
      FakeTorch t;
      t.lib = dlopen(SR_FAKE_C10_CUDA, RTLD_NOW | RTLD_LOCAL);
      if (t.lib) {
        t.reset = reinterpret_cast<decltype(t.reset)>(dlsym(t.lib, "fake_torch_reset"));
        t.trackers = reinterpret_cast<decltype(t.trackers)>(dlsym(t.lib, "fake_torch_trackers"));
        t.emit = reinterpret_cast<decltype(t.emit)>(dlsym(t.lib, "fake_torch_emit"));
      }
      return t;
    }();
    return f;
  }
};

void write_version(const std::string& version) {
  std::filesystem::path lib(SR_FAKE_C10_CUDA);
  std::ofstream(lib.parent_path().parent_path() / "version.py")
      << "from typing import Optional\n__version__ = '" << version << "'\ncuda: Optional[str] = '13.0'\n";
}

class TorchHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(torch().lib, nullptr) << dlerror();
    dir_ = std::filesystem::temp_directory_path() /
           ("sr_torch_hook_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    RecorderOptions o;
    o.path = (dir_ / "t.srace").string();
    o.background_flusher = false;
    o.header_provider = [] { return trace::TraceHeader{}; };
    rec_ = std::make_unique<TraceRecorder>(o);
    handler_ = std::make_unique<CudaCallHandler>(*rec_, allocs_, queries_, nullptr);
    hook_ = std::make_unique<TorchAllocatorHook>(*handler_);
    handler_->set_torch_allocator_hook(hook_.get());
    thread_state() = TracerThreadState{};
    write_version("2.11.0+cu130");
    torch().reset(1, 1, "native");
  }
  void TearDown() override {
    torch().reset(0, 0, "native");  // the trackers refer to this test's hook
    hook_.reset();
    handler_.reset();
    rec_.reset();  // closes the trace while its folder still exists
    std::filesystem::remove_all(dir_);
  }
  static FakeTorch& torch() { return FakeTorch::get(); }
  void malloc_device(uint64_t ptr, size_t bytes) {
    void* p = reinterpret_cast<void*>(ptr);
    cudaMalloc_v3020_params m{&p, bytes};
    handler_->on_call(ApiCall{ApiDomain::kRuntime, true, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr, &m, 0, 7, 0x100});
    handler_->on_call(ApiCall{ApiDomain::kRuntime, false, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr, &m, 0, 7, 0x100});
  }
  TraceContents finish() {
    rec_->close();
    return read_trace((dir_ / "t.srace").string());
  }
  static std::vector<std::string> notices(const TraceContents& t) {
    std::vector<std::string> out;
    for (const auto& r : t.of(RecordKind::kNotice))
      out.emplace_back(reinterpret_cast<const char*>(r.body.data()) + sizeof(trace::NoticeHead),
                       r.body.size() - sizeof(trace::NoticeHead));
    return out;
  }

  std::filesystem::path dir_;
  NoQueries queries_;
  AllocationTable allocs_;
  std::unique_ptr<TraceRecorder> rec_;
  std::unique_ptr<CudaCallHandler> handler_;
  std::unique_ptr<TorchAllocatorHook> hook_;
};

TEST_F(TorchHookTest, AttachesAtTheFirstSegmentAndRecordsEveryBlockEventButFreeCompleted) {
  malloc_device(0x7000'0000, 2 << 20);  // the allocator's first segment, from inside its malloc
  ASSERT_TRUE(hook_->attached());
  EXPECT_EQ(torch().trackers(), 1);
  torch().emit(3, 0, 0x7000'0000, 2 << 20, nullptr);          // SEGMENT_ALLOC
  torch().emit(0, 0, 0x7000'0000, 4000, nullptr);             // ALLOC on the default stream
  torch().emit(0, 0, 0x7000'1000, 512, (void*)0x5550);        // ALLOC on a side stream
  torch().emit(1, 0, 0x7000'0000, 4000, nullptr);             // FREE_REQUESTED
  torch().emit(2, 0, 0x7000'0000, 4000, nullptr);             // FREE_COMPLETED: not recorded
  torch().emit(7, 0, 0, 0, nullptr);                          // SNAPSHOT: not a block event
  malloc_device(0x7100'0000, 2 << 20);                        // a later segment: no second tracker
  EXPECT_EQ(torch().trackers(), 1);
  auto t = finish();
  auto blocks = t.of(RecordKind::kAllocatorBlock);
  ASSERT_EQ(blocks.size(), 4u);
  struct Want {
    BlockAction action;
    uint64_t addr, bytes, stream;
    const char* api;
  } want[] = {{BlockAction::kSegmentAlloc, 0x7000'0000, 2 << 20, trace::legacy_stream(0), "CUDACachingAllocator segment alloc"},
              {BlockAction::kAlloc, 0x7000'0000, 4000, trace::legacy_stream(0), "CUDACachingAllocator alloc"},
              {BlockAction::kAlloc, 0x7000'1000, 512, 0x5550, "CUDACachingAllocator alloc"},
              {BlockAction::kFreeRequested, 0x7000'0000, 4000, trace::legacy_stream(0), "CUDACachingAllocator free"}};
  uint64_t last_seq = 0;  // the Alloc of the first segment has seq 0
  for (size_t i = 0; i < 4; ++i) {
    auto b = blocks[i].as<trace::AllocatorBlock>();
    EXPECT_EQ(b.action, want[i].action) << i;
    EXPECT_EQ(b.addr, want[i].addr) << i;
    EXPECT_EQ(b.bytes, want[i].bytes) << i;
    EXPECT_EQ(b.stream, want[i].stream) << i;
    EXPECT_EQ(b.device, 0u) << i;
    EXPECT_EQ(b.allocator, trace::BlockAllocator::kTorchCaching) << i;
    EXPECT_EQ(t.str(b.call.api_id), want[i].api) << i;
    EXPECT_EQ(b.call.seq, last_seq + 1) << i;  // in call order with the CUDA calls
    last_seq = b.call.seq;
  }
  auto n = notices(t);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0], "PyTorch 2.11.0+cu130 caching allocator observed: kernel argument extents end at the tensor's block");
}

// streamrace_bench_pause pauses the hook with the CUDA callbacks: events while paused are
// not recorded, the ones after are.
TEST_F(TorchHookTest, EventsWhilePausedAreNotRecorded) {
  malloc_device(0x7000'0000, 2 << 20);
  ASSERT_TRUE(hook_->attached());
  torch().emit(0, 0, 0x7000'0000, 4000, nullptr);
  hook_->set_paused(true);
  torch().emit(0, 0, 0x7000'1000, 512, nullptr);
  torch().emit(1, 0, 0x7000'0000, 4000, nullptr);
  hook_->set_paused(false);
  torch().emit(1, 0, 0x7000'1000, 512, nullptr);
  auto blocks = finish().of(RecordKind::kAllocatorBlock);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].as<trace::AllocatorBlock>().action, BlockAction::kAlloc);
  EXPECT_EQ(blocks[0].as<trace::AllocatorBlock>().addr, 0x7000'0000u);
  EXPECT_EQ(blocks[1].as<trace::AllocatorBlock>().action, BlockAction::kFreeRequested);
  EXPECT_EQ(blocks[1].as<trace::AllocatorBlock>().addr, 0x7000'1000u);
}

TEST_F(TorchHookTest, WaitsUntilTheAllocatorIsSetUp) {
  torch().reset(0, 0, "native");  // libc10_cuda.so loaded, allocator not created yet
  malloc_device(0x7000'0000, 1 << 20);
  EXPECT_FALSE(hook_->attached());
  torch().reset(1, 0, "native");  // created, not initialised
  malloc_device(0x7100'0000, 1 << 20);
  EXPECT_FALSE(hook_->attached());
  torch().reset(1, 1, "native");
  malloc_device(0x7200'0000, 1 << 20);
  EXPECT_TRUE(hook_->attached());
  EXPECT_EQ(torch().trackers(), 1);
}

TEST_F(TorchHookTest, AnUnknownTorchVersionIsLeftAloneWithANotice) {
  write_version("2.99.0");
  malloc_device(0x7000'0000, 1 << 20);
  EXPECT_FALSE(hook_->attached());
  EXPECT_EQ(torch().trackers(), 0);
  auto n = notices(finish());
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0], "PyTorch caching allocator not observed (torch 2.99.0 is not a version streamrace knows the "
                  "allocator of): kernel argument extents reach to the end of cudaMalloc segments");
}

TEST_F(TorchHookTest, TheCudaMallocAsyncBackendIsLeftAlone) {
  torch().reset(1, 1, "cudaMallocAsync");
  malloc_device(0x7000'0000, 1 << 20);
  EXPECT_FALSE(hook_->attached());
  EXPECT_EQ(torch().trackers(), 0);
  auto n = notices(finish());
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0], "PyTorch caching allocator not observed (allocator backend 'cudaMallocAsync'): kernel argument "
                  "extents reach to the end of cudaMalloc segments");
}

TEST_F(TorchHookTest, EventsThatMatchNoTracedAllocationStopTheRecording) {
  malloc_device(0x7000'0000, 1 << 20);
  ASSERT_TRUE(hook_->attached());
  for (int i = 0; i < 4; ++i) torch().emit(3, 0, 0x9000'0000 + i * 0x1000, 4096, nullptr);  // no such segment
  torch().emit(3, 0, 0x7000'0000, 1 << 20, nullptr);  // would match, but recording stopped
  auto t = finish();
  EXPECT_TRUE(t.of(RecordKind::kAllocatorBlock).empty());
  auto n = notices(t);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[1], "PyTorch caching allocator events did not match the traced allocations: stopped recording them "
                  "(kernel argument extents reach to the end of cudaMalloc segments)");
}

TEST_F(TorchHookTest, ABlockOutsideEveryTracedAllocationIsLeftOut) {
  malloc_device(0x7000'0000, 1 << 20);
  torch().emit(3, 0, 0x7000'0000, 1 << 20, nullptr);
  torch().emit(0, 0, 0x7000'0000, 1 << 21, nullptr);  // runs past the segment: left out
  torch().emit(0, 0, 0x7000'0100, 256, nullptr);
  // Expandable segments: one map event over two cuMemMap ranges, a block across both.
  malloc_device(0x7010'0000, 1 << 20);
  torch().emit(5, 0, 0x7000'0000, 2 << 20, nullptr);
  torch().emit(0, 0, 0x700F'0000, 0x20000, nullptr);
  torch().emit(0, 0, 0x700F'0000, 0x200000, nullptr);  // its end in no traced range: left out
  auto blocks = finish().of(RecordKind::kAllocatorBlock);
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[1].as<trace::AllocatorBlock>().addr, 0x7000'0100u);
  EXPECT_EQ(blocks[2].as<trace::AllocatorBlock>().action, trace::BlockAction::kSegmentMap);
  EXPECT_EQ(blocks[2].as<trace::AllocatorBlock>().bytes, 2u << 20);
  EXPECT_EQ(blocks[3].as<trace::AllocatorBlock>().addr, 0x700F'0000u);
}

TEST(TorchVersion, ReadFromVersionPy) {
  EXPECT_EQ(torch_version_from_file_text("from typing import Optional\n\n__version__ = '2.11.0+cu130'\ndebug = False\n"),
            "2.11.0+cu130");
  EXPECT_EQ(torch_version_from_file_text("__version__ = \"2.10.1\"\n"), "2.10.1");
  EXPECT_EQ(torch_version_from_file_text("version = '1'\n"), "");
  EXPECT_NE(torch_allocator_layout("2.11.0+cu130"), nullptr);
  EXPECT_EQ(torch_allocator_layout("2.1.0"), nullptr);
  EXPECT_EQ(torch_allocator_layout("2.110.0"), nullptr);
}

}  // namespace
}  // namespace streamrace::tracer
