// The realistic jobs recorded on the GPU machine (tests/data/realistic/, README there): their
// full reports are cases; here, what a report cannot show. On every recording with PyTorch
// caching-allocator blocks, the default tier's extent for each kernel pointer argument into
// one of the allocator's segments ends at the live block it points into, never at the
// segment's end; words pointing at freed blocks (stale slots of by-value argument structs)
// are no access at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "analyzer/allocator_blocks.h"
#include "traceformat/call_stream.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using trace::RecordKind;

struct ExtentCounts {
  uint64_t kernels = 0;
  uint64_t pointers = 0;             // pointer arguments into traced allocations
  uint64_t in_segments = 0;          // ... into an allocator segment
  uint64_t in_blocks = 0;            // ... into a live block
  uint64_t past_block = 0;           // extents reaching beyond their block (must be 0)
  uint64_t stale_accesses = 0;       // words in no live block given an extent (must be 0)
  uint64_t block_bytes = 0;          // sum of the extents of pointers into segments, with blocks
  uint64_t segment_bytes = 0;        // ... and as before blocks (to the segment's end)
};

ExtentCounts count_extents(const std::string& dir) {
  ExtentCounts c;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".srace") continue;
    trace::CallStream stream(e.path().string());
    analysis::AllocatorBlocks blocks;
    std::map<uint64_t, uint64_t> allocs;  // base -> end
    stream.for_each([&](const trace::RecordView& r) {
      switch (r.kind) {
        case RecordKind::kAlloc: {
          auto a = r.as<trace::Alloc>();
          allocs[a.ptr] = a.ptr + a.bytes;
          break;
        }
        case RecordKind::kFree: {
          auto f = r.as<trace::Free>();
          auto it = allocs.find(f.ptr);
          if (it != allocs.end()) {
            blocks.forget(it->first, it->second - it->first);
            allocs.erase(it);
          }
          break;
        }
        case RecordKind::kAllocatorBlock: {
          auto b = r.as<trace::AllocatorBlock>();
          blocks.apply(b);
          break;
        }
        case RecordKind::kKernelLaunch: {
          auto k = r.as<trace::KernelLaunchHead>();
          auto tail = r.tail<trace::KernelLaunchHead>();
          ++c.kernels;
          for (size_t i = 0; i < k.nptrs && (i + 1) * 8 <= tail.size(); ++i) {
            uint64_t p;
            std::memcpy(&p, tail.data() + i * 8, 8);
            auto it = allocs.upper_bound(p);
            if (it == allocs.begin() || std::prev(it)->second <= p) continue;
            ++c.pointers;
            if (!blocks.in_segment(p)) continue;
            ++c.in_segments;
            bool in_block = false;
            const uint64_t extent = blocks.kernel_extent(p, std::prev(it)->second, in_block);
            c.block_bytes += extent;
            c.segment_bytes += std::prev(it)->second - p;
            if (!blocks.live(p) && getenv("DBG")) {
              const analysis::ReleasedBlock* rel = blocks.released(p);
              fprintf(stderr, "out %s arg %zu/%u p=%#lx extent=%lu rel=%s%#lx+%lu\n", stream.dictionary().str(k.name_id).substr(0,60).c_str(), i, k.nptrs, p, extent, rel?"":"none ", rel?rel->addr:0, rel?rel->bytes:0);
            }
            if (const analysis::LiveBlock* b = blocks.live(p)) {
              ++c.in_blocks;
              if (!in_block || extent > b->addr + b->bytes - p) ++c.past_block;
            } else if (extent != 0) {
              ++c.stale_accesses;
            }
          }
          break;
        }
        default:
          break;
      }
    });
  }
  return c;
}

const fs::path kData = SR_REALISTIC_DATA_DIR;

struct Expect {
  const char* name;
  uint64_t pointers, in_segments, in_blocks;
  uint64_t shrink_at_least;  // the extents' sum is at least this many times smaller than before
};

class RealisticExtents : public ::testing::TestWithParam<Expect> {};

TEST_P(RealisticExtents, KernelPointersIntoSegmentsEndAtTheirBlock) {
  const Expect& want = GetParam();
  ExtentCounts c = count_extents((kData / want.name).string());
  EXPECT_GT(c.kernels, 1000u);
  EXPECT_EQ(c.pointers, want.pointers);
  EXPECT_EQ(c.in_segments, want.in_segments);
  EXPECT_EQ(c.in_blocks, want.in_blocks);
  EXPECT_EQ(c.past_block, 0u);
  EXPECT_EQ(c.stale_accesses, 0u);
  // Before blocks, these pointers reached to their segments' ends.
  EXPECT_LT(c.block_bytes * want.shrink_at_least, c.segment_bytes) << c.block_bytes << " vs " << c.segment_bytes;
  std::printf("%s: %lu pointers, %lu in segments, %lu in blocks, extents %.1f MB (to segment ends: %.1f MB)\n",
              want.name, c.pointers, c.in_segments, c.in_blocks, c.block_bytes / 1e6, c.segment_bytes / 1e6);
}

INSTANTIATE_TEST_SUITE_P(Recorded, RealisticExtents,
                         ::testing::Values(Expect{"gpt2_zero2", 16852, 16852, 16403, 1}, Expect{"gpt2_fsdp2", 31531, 31531, 31005, 2},
                                           Expect{"gpt2_zero2_expandable", 16554, 16554, 16372, 1}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace streamrace
