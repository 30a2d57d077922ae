// FlatHashMap and InlineVector (the shadow's and the happens-before engine's containers)
// against the standard containers they replace, over random operations; RacingPairs (the
// findings' packed call pairs) against a vector of pairs.
#include "analyzer/flat_hash_map.h"
#include "analyzer/inline_vector.h"
#include "analyzer/racing_pairs.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace streamrace::analysis {
namespace {

TEST(RacingPairs, PacksTheAnalysisOrderInAFewBytesAndRoundTripsAnyOrder) {
  // The analysis's order: later seqs rising a little, earlier a little before each.
  RacingPairs packed;
  EXPECT_TRUE(packed.empty());
  EXPECT_EQ(packed.begin(), packed.end());
  const std::vector<RacingPair> usual = {{702, 719}, {718, 735}, {734, 751}, {750, 767}};
  for (const auto& p : usual) packed.push_back(p);
  // (719 - 0) zigzagged is 1438: 2 bytes; every other number 1 byte (16 -> 32, 17 -> 34).
  EXPECT_EQ(packed.packed_bytes(), 2u + 1 + 3 * 2);
  EXPECT_EQ(packed.size(), 4u);
  EXPECT_EQ(packed.front(), (RacingPair{702, 719}));
  EXPECT_EQ(std::vector<RacingPair>(packed.begin(), packed.end()), usual);

  // Any order and any size round-trips: falling seqs, an earlier seq after the later one, the
  // largest values.
  std::mt19937_64 rng(11);
  std::vector<RacingPair> any = {{0, 0}, {5, 3}, {UINT64_MAX, 0}, {0, UINT64_MAX}, {UINT64_MAX, UINT64_MAX}, {1, 2}};
  for (int i = 0; i < 10000; ++i) any.push_back({rng(), rng() >> (rng() % 64)});
  RacingPairs all;
  for (const auto& p : any) all.push_back(p);
  EXPECT_EQ(all.size(), any.size());
  EXPECT_EQ(std::vector<RacingPair>(all.begin(), all.end()), any);
  RacingPairs copy = all;
  EXPECT_EQ(copy, all);
  copy.clear();
  EXPECT_TRUE(copy.empty());
  EXPECT_EQ(copy.packed_bytes(), 0u);
  EXPECT_FALSE(copy == all);
}

TEST(FlatHashMap, MatchesUnorderedMapOverRandomInsertsAndErases) {
  std::mt19937_64 rng(7);
  FlatHashMap<std::string> flat;
  std::unordered_map<uint64_t, std::string> ref;
  for (int i = 0; i < 200000; ++i) {
    // Few distinct keys, so runs collide and erases shift them; 0 is a key like any other.
    const uint64_t key = rng() % 3000 * (i % 2 ? 1 : 1ull << 20);
    switch (rng() % 3) {
      case 0:
        flat[key] = std::to_string(i);
        ref[key] = std::to_string(i);
        break;
      case 1:
        ASSERT_EQ(flat.erase(key), ref.erase(key) == 1);
        break;
      default: {
        const std::string* v = flat.find(key);
        auto it = ref.find(key);
        ASSERT_EQ(v != nullptr, it != ref.end());
        if (v) {
          ASSERT_EQ(*v, it->second);
        }
      }
    }
    ASSERT_EQ(flat.size(), ref.size());
  }
  for (const auto& [k, v] : ref) ASSERT_EQ(*flat.find(k), v);
}

TEST(InlineVector, MatchesVectorInlineAndOnTheHeap) {
  std::mt19937_64 rng(11);
  InlineVector<std::string, 2> small;
  std::vector<std::string> ref;
  for (int i = 0; i < 20000; ++i) {
    const std::string v = "value " + std::to_string(i);
    switch (rng() % 6) {
      case 0:
      case 1:
        small.push_back(v);
        ref.push_back(v);
        break;
      case 2: {
        const size_t at = ref.empty() ? 0 : rng() % (ref.size() + 1);
        small.insert(small.begin() + at, v);
        ref.insert(ref.begin() + long(at), v);
        break;
      }
      case 3:
        if (!ref.empty()) {
          const size_t lo = rng() % ref.size(), hi = lo + rng() % (ref.size() - lo + 1);
          small.erase(small.begin() + lo, small.begin() + hi);
          ref.erase(ref.begin() + long(lo), ref.begin() + long(hi));
        }
        break;
      case 4: {
        std::vector<std::string> more{v + "a", v + "b", v + "c"};
        const size_t at = ref.empty() ? 0 : rng() % (ref.size() + 1);
        ref.insert(ref.begin() + long(at), more.begin(), more.end());
        small.insert_moved(small.begin() + at, more.data(), more.data() + more.size());
        break;
      }
      default:
        small.erase_if([&](const std::string& s) { return s.back() == v.back(); });
        std::erase_if(ref, [&](const std::string& s) { return s.back() == v.back(); });
    }
    if (ref.size() > 12) {  // back to inline storage now and then
      small.clear();
      ref.clear();
    }
    ASSERT_EQ(std::vector<std::string>(small.begin(), small.end()), ref);
    InlineVector<std::string, 2> copy = small, moved = std::move(copy);
    ASSERT_EQ(std::vector<std::string>(moved.begin(), moved.end()), ref);
    small = std::move(moved);
  }
}

}  // namespace
}  // namespace streamrace::analysis
