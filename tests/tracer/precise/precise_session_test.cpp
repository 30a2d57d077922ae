// Precise mode's Sanitizer session, without a GPU: what it says when the Sanitizer library
// is missing, and that the device callbacks were built in tools-patch form.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "tracer/precise/sanitizer_session.h"

namespace streamrace::tracer::precise {
namespace {

TEST(PreciseSession, DeviceCallbackFatbinHoldsTheCallback) {
  std::ifstream in(SR_PRECISE_PATCHES, std::ios::binary);
  ASSERT_TRUE(in) << SR_PRECISE_PATCHES;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("streamrace_global_access"), std::string::npos);
}

TEST(PreciseSession, MissingSanitizerLibraryIsReported) {
  if (void* h = dlopen("libsanitizer-public.so", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "libsanitizer-public.so is loadable here";
  }
  struct NoDriver : CudaQueries {
    uint32_t device_of_context(uint64_t) override { return 0; }
    bool param_layout(uint64_t, bool, std::vector<ParamSlot>&) override { return false; }
    trace::MemKind memory_kind(uint64_t) override { return trace::MemKind::kUnknown; }
  } queries;
  RecorderOptions opts;
  opts.path = ::testing::TempDir() + "precise_session_unused.srace";
  opts.background_flusher = false;
  TraceRecorder rec(opts);
  AllocationTable allocs;
  CudaCallHandler handler(rec, allocs, queries, nullptr);
  SanitizerSession session;
  EXPECT_EQ(session.start(handler, SanitizerOptions{}),
            "sanitizer-unavailable: libsanitizer-public.so (with the patching API) could not be loaded");
  EXPECT_EQ(session.library_path(), "");
}

}  // namespace
}  // namespace streamrace::tracer::precise
