// Learned access signatures (analyzer/access_signatures.h, docs/signatures.md): precise-mode
// launches teach a kernel's intervals relative to its pointers; a later default-tier launch with
// the same kernel, shape and scalar-argument hash takes them as exact accesses. The racy
// program (a signature's write overlaps another stream's unordered read) is `certain` with the
// exact range; its clean twin (the read lies past the signature's bytes, inside the allocation)
// has nothing, where the default tier alone reports both as `possible`. A signature seen once,
// one two measurements disagree on, one with another hash, or an inexact measurement teaches
// nothing trusted: the default tier's `possible` stands.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "analyzer/access_signatures.h"
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using analysis::Confidence;
using analysis::RaceKind;
using analysis::SignatureBook;
using trace::AccessDir;
using trace::TraceBuilder;

constexpr uint64_t kAlloc = 8192;
constexpr uint64_t kHash = 0x1234'5678'9ABC'DEF0ull;

struct Program {
  int learnt = 2;             // precise launches measured before the default-tier one
  bool disagree = false;      // the second measured launch writes other bytes
  bool hashes_vary = false;   // each measured launch has another arguments' hash (unset struct members)
  bool overflowed = false;    // the measured write overflowed the device's interval table
  uint64_t use_hash = kHash;  // the default-tier launch's arguments' hash
  uint64_t read_off = 512;    // the other stream's 256-byte read, from the used output's start
  bool learn_in_trace = true;  // false: the precise launches are in a trace of their own
  // Which hash the launches carry: 0 is 1.4's (kKernelArgsHash), trace::kKernelArgsHash2 1.5's.
  uint32_t learn_hash_flag = 0, use_hash_flag = 0;
};

struct Built {
  std::string use_path, learn_path;
  uint64_t out = 0;  // the default-tier launch's output pointer
};

// scale(out, in): writes out[0, 1024), reads in[0, 1024); in = out + 4096 in one allocation.
void learn_launches(TraceBuilder& t, uint64_t a, const Program& p) {
  for (int i = 0; i < p.learnt; ++i) {
    uint64_t buf = t.alloc(kAlloc);
    const uint64_t hash = p.hashes_vary ? kHash + 100 + i : kHash;
    uint64_t k = t.at("train.py", 10, "step").kernel_hashed(a, "scale", {buf, buf + 4096}, hash,
                                                        trace::kKernelPrecise | p.learn_hash_flag);
    t.stream_synchronize(a);
    const uint64_t wrote = p.disagree && i == 1 ? 2048 : 1024;
    t.kernel_access(k, buf, wrote, AccessDir::kWrite, p.overflowed ? trace::kAccessRegion : 0);
    t.kernel_access(k, buf + 4096, 1024, AccessDir::kRead);
  }
}

Built build(const testing::TempDir& dir, const Program& p) {
  Built out;
  out.use_path = dir.file("use.srace");
  if (!p.learn_in_trace) {
    out.learn_path = dir.file("learn.srace");
    auto header = TraceBuilder::default_header(0);
    header.mode = "precise";
    TraceBuilder t(out.learn_path, header);
    learn_launches(t, t.create_stream(), p);
  }
  auto header = TraceBuilder::default_header(0);
  header.mode = p.learn_in_trace ? "precise" : "default";
  TraceBuilder t(out.use_path, header);
  uint64_t a = t.create_stream(), b = t.create_stream();
  if (p.learn_in_trace) learn_launches(t, a, p);
  uint64_t buf = t.alloc(kAlloc), dst = t.alloc(kAlloc);
  out.out = buf;
  t.at("train.py", 20, "step").kernel_hashed(a, "scale", {buf, buf + 4096}, p.use_hash,
                                             trace::kKernelArgsScanned | p.use_hash_flag);
  t.at("train.py", 30, "save").memcpy(b, dst, buf + p.read_off, 256);
  return out;
}

analysis::AnalysisResult analyze(const Program& p, Built* built_out = nullptr) {
  testing::TempDir dir;
  Built b = build(dir, p);
  if (built_out) *built_out = b;
  analysis::AnalyzerOptions opts;
  if (!p.learn_in_trace) {
    analysis::Analyzer learner;
    learner.add_trace(b.learn_path);
    learner.finish();
    const std::string file = dir.file("signatures.json");
    learner.learned_signatures().save(file);
    opts.signatures = std::make_shared<const SignatureBook>(SignatureBook::load(file));
  }
  return testing::analyze_files({b.use_path}, opts);
}

std::vector<std::string> notice_texts(const analysis::AnalysisResult& r) {
  std::vector<std::string> out;
  for (const auto& n : r.notices) out.push_back(n.text);
  return out;
}

void expect_certain_by_signature(const analysis::AnalysisResult& r, uint64_t out) {
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.confidence, Confidence::kCertain);
  EXPECT_EQ(f.kind, RaceKind::kReadAfterWrite);
  EXPECT_EQ(f.earlier.op, "scale");
  EXPECT_TRUE(f.earlier.by_signature);
  EXPECT_TRUE(f.earlier.exact);
  EXPECT_EQ(f.earlier.direction, "write");
  EXPECT_EQ(f.earlier.addr, out);
  EXPECT_EQ(f.earlier.bytes, 1024u);
  EXPECT_EQ(f.later.op, "cudaMemcpyAsync");
  EXPECT_FALSE(f.later.by_signature);
  EXPECT_EQ(f.overlap_addr, out + 512);
  EXPECT_EQ(f.overlap_bytes, 256u);
}

void expect_possible_from_pointers(const analysis::AnalysisResult& r) {
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.confidence, Confidence::kPossible);
  EXPECT_EQ(f.earlier.op, "scale");
  EXPECT_FALSE(f.earlier.by_signature);
  EXPECT_EQ(f.earlier.direction, "read or write");
}

TEST(Signatures, ARaceOnALearnedSignaturesBytesIsCertainWithTheExactRange) {
  Built b;
  auto r = analyze({}, &b);
  expect_certain_by_signature(r, b.out);
  auto texts = notice_texts(r);
  EXPECT_NE(std::find(texts.begin(), texts.end(),
                      "access signatures: 2 measured launches taught 1 (1 trusted: seen 2 times alike); 1 launch took "
                      "exact accesses from one"),
            texts.end());
}

TEST(Signatures, AReadPastTheSignaturesBytesIsClean) {
  Program p;
  p.read_off = 2048;  // inside the allocation, past the 1024 bytes the kernel writes
  EXPECT_TRUE(analyze(p).findings.empty());
  // Without the signature the same program is a possible race: the signature is what cleared it.
  p.use_hash = kHash + 1;
  expect_possible_from_pointers(analyze(p));
}

TEST(Signatures, OneMeasurementIsNotEnoughToTrust) {
  Program p;
  p.learnt = 1;
  expect_possible_from_pointers(analyze(p));
}

TEST(Signatures, TwoMeasurementsThatDisagreeAreNeverTrusted) {
  Program p;
  p.learnt = 3;
  p.disagree = true;  // launches 0 and 2 agree, launch 1 does not
  expect_possible_from_pointers(analyze(p));
}

TEST(Signatures, AnotherArgumentsHashIsAnotherLaunch) {
  Program p;
  p.use_hash = kHash ^ 1;
  expect_possible_from_pointers(analyze(p));
}

// Launches whose hashes differ (members the host leaves unset) but whose accesses agree teach
// their shape: a launch with yet another hash takes the shape's signature. One hash seen, or
// two that disagree, teach no shape.
TEST(Signatures, HashesThatDifferWithAccessesThatAgreeTeachTheShape) {
  Program p;
  p.hashes_vary = true;
  p.use_hash = kHash + 7;
  Built b;
  auto r = analyze(p, &b);
  expect_certain_by_signature(r, b.out);
  auto texts = notice_texts(r);
  EXPECT_NE(std::find(texts.begin(), texts.end(),
                      "access signatures: 2 measured launches taught 2 (2 trusted: seen 2 times alike); 1 launch took "
                      "exact accesses from one"),
            texts.end());
  p.read_off = 2048;
  EXPECT_TRUE(analyze(p).findings.empty());
  p.read_off = 512;
  p.learnt = 3;
  p.disagree = true;
  expect_possible_from_pointers(analyze(p));
  p.learnt = 1;
  p.disagree = false;
  expect_possible_from_pointers(analyze(p));
}

// A measured interval is a hull per granule: a reduction writes its 4-byte output, its
// 512-byte buffer and its 4-byte semaphore, adjacent blocks of one segment, as one range. It is
// split at the pointers it runs over, so a launch whose three pointers lie apart gets three
// ranges, not one from the first pointer: a read right after its output is clean, a read of
// its buffer races.
TEST(Signatures, AnIntervalOverSeveralPointersIsSplitAtThem) {
  for (const uint64_t read_off : {uint64_t(600), uint64_t(4096 + 100)}) {
    SCOPED_TRACE(read_off);
    testing::TempDir dir;
    const std::string path = dir.file("t.srace");
    uint64_t seg2 = 0;
    {
      auto header = TraceBuilder::default_header(0);
      header.mode = "precise";
      TraceBuilder t(path, header);
      uint64_t a = t.create_stream(), b = t.create_stream();
      for (int i = 0; i < 2; ++i) {
        uint64_t seg = t.alloc(1 << 20);
        uint64_t k = t.kernel_hashed(a, "reduce", {seg, seg + 512, seg + 1024}, kHash, trace::kKernelPrecise);
        t.stream_synchronize(a);
        t.kernel_access(k, seg, 1028, AccessDir::kWrite);
      }
      seg2 = t.alloc(1 << 20);
      uint64_t dst = t.alloc(4096);
      t.kernel_hashed(a, "reduce", {seg2, seg2 + 4096, seg2 + 8192}, kHash);
      t.memcpy(b, dst, seg2 + read_off, 8);
    }
    auto r = testing::analyze_files({path});
    if (read_off == 600) {
      EXPECT_TRUE(r.findings.empty());
      continue;
    }
    ASSERT_EQ(r.findings.size(), 1u);
    const auto& f = r.findings[0];
    EXPECT_EQ(f.confidence, Confidence::kCertain);
    EXPECT_TRUE(f.earlier.by_signature);
    EXPECT_EQ(f.earlier.addr, seg2 + 4096);
    EXPECT_EQ(f.earlier.bytes, 512u);
    EXPECT_EQ(f.overlap_addr, seg2 + 4096 + 100);
    EXPECT_EQ(f.overlap_bytes, 8u);
  }
}

TEST(Signatures, AnOverflowedMeasurementTeachesNothing) {
  Program p;
  p.overflowed = true;
  auto r = analyze(p);
  expect_possible_from_pointers(r);
}

TEST(Signatures, ASignatureFileCarriesThemToADefaultTierTrace) {
  Program p;
  p.learn_in_trace = false;
  Built b;
  auto r = analyze(p, &b);
  expect_certain_by_signature(r, b.out);
  p.read_off = 2048;
  EXPECT_TRUE(analyze(p).findings.empty());
}

TEST(Signatures, TheFileRoundTripsAndMergesObservations) {
  SignatureBook book;
  analysis::SignatureKey key{"scale", {4, 1, 1}, {128, 1, 1}, 2, kHash};
  // Out of order and split as a device table would hand them over: one canonical signature.
  book.observe(key, {{0, 512, 512, AccessDir::kWrite}, {1, 0, 1024, AccessDir::kRead}, {0, 0, 512, AccessDir::kWrite}});
  EXPECT_EQ(book.trusted_count(), 0u);
  book.observe(key, {{1, 0, 1024, AccessDir::kRead}, {0, 0, 1024, AccessDir::kWrite}});
  ASSERT_EQ(book.trusted_count(), 1u);
  testing::TempDir dir;
  const std::string file = dir.file("s.json");
  book.save(file);
  SignatureBook again = SignatureBook::load(file);
  EXPECT_EQ(again.to_json_text(), book.to_json_text());
  const auto* sig = again.trusted({"scale", {4, 1, 1}, {128, 1, 1}, 2, kHash});
  ASSERT_NE(sig, nullptr);
  EXPECT_EQ(sig->seen, 2u);
  const std::vector<analysis::SignatureInterval> want = {{0, 0, 1024, AccessDir::kWrite}, {1, 0, 1024, AccessDir::kRead}};
  EXPECT_EQ(sig->intervals, want);
  // A third observation that disagrees makes the key untrusted for good, also after a merge.
  SignatureBook other;
  other.observe(key, {{0, 0, 4096, AccessDir::kWrite}});
  again.merge(other);
  EXPECT_EQ(again.trusted({"scale", {4, 1, 1}, {128, 1, 1}, 2, kHash}), nullptr);
  EXPECT_EQ(again.size(), 1u);
}

// Trace format 1.5's hash (XXH3, kKernelArgsHash2) keys signatures as 1.4's did: learnt from
// new traces, in the trace or through a file, they apply to new traces.
TEST(Signatures, SignaturesOfTheNewHashApplyToLaunchesOfTheNewHash) {
  for (bool in_trace : {true, false}) {
    Program p;
    p.learn_in_trace = in_trace;
    p.learn_hash_flag = p.use_hash_flag = trace::kKernelArgsHash2;
    Built b;
    auto r = analyze(p, &b);
    expect_certain_by_signature(r, b.out);
    p.read_off = 2048;
    EXPECT_TRUE(analyze(p).findings.empty()) << in_trace;
  }
}

// The two hashes are two functions: a value of one says nothing about a value of the other, so
// a key of one kind never matches a launch of the other, even with the same 64 bits. A trace
// whose launches the whole signature file cannot match (learnt before 1.5, applied to a 1.5
// trace, or the other way round) says so, rather than look like a job whose kernels never repeat.
TEST(Signatures, SignaturesOfTheOtherHashApplyToNothingAndSaySo) {
  const std::string old_to_new =
      "access signatures: 1 launch of this trace carries the arguments' hash of trace format 1.5 (XXH3), the signature "
      "file's 1 signature that of format 1.4: none applies (two hash functions' values are never compared); learn "
      "signatures from traces recorded like these (docs/signatures.md)";
  const std::string new_to_old =
      "access signatures: 1 launch of this trace carries the arguments' hash of trace format 1.4, the signature "
      "file's 1 signature that of format 1.5 (XXH3): none applies (two hash functions' values are never compared); "
      "learn signatures from traces recorded like these (docs/signatures.md)";
  for (bool old_file : {true, false}) {
    Program p;
    p.learn_in_trace = false;
    (old_file ? p.use_hash_flag : p.learn_hash_flag) = trace::kKernelArgsHash2;
    auto r = analyze(p);
    expect_possible_from_pointers(r);
    auto texts = notice_texts(r);
    EXPECT_NE(std::find(texts.begin(), texts.end(), old_file ? old_to_new : new_to_old), texts.end()) << old_file;
  }
  // Within one trace too (a trace holds one kind; this one is made up to hold both).
  Program p;
  p.use_hash_flag = trace::kKernelArgsHash2;
  auto r = analyze(p);
  expect_possible_from_pointers(r);
  for (const std::string& t : notice_texts(r)) EXPECT_EQ(t.find("none applies"), std::string::npos) << t;
  // A file that holds both kinds covers the launches of each: no notice.
  Program both;
  both.learn_in_trace = false;
  both.use_hash_flag = trace::kKernelArgsHash2;
  testing::TempDir dir;
  Built b = build(dir, both);
  SignatureBook book;
  const std::vector<analysis::SignatureInterval> none;
  book.observe({"other", {1, 1, 1}, {1, 1, 1}, 0, 1, false, trace::ArgsHashKind::kMix64}, none);
  book.observe({"other", {1, 1, 1}, {1, 1, 1}, 0, 1, false, trace::ArgsHashKind::kXxh3}, none);
  analysis::AnalyzerOptions opts;
  opts.signatures = std::make_shared<const SignatureBook>(book);
  for (const std::string& t : notice_texts(testing::analyze_files({b.use_path}, opts)))
    EXPECT_EQ(t.find("none applies"), std::string::npos) << t;
}

// A version 1 file (written before 1.5) holds 1.4's hashes; version 2 names each key's hash.
// A book of both kinds round-trips, each key keeping its kind.
TEST(Signatures, AVersion1FileHoldsTheOldHashAndVersion2NamesEach) {
  const std::string v1 = R"({"format": "streamrace-signatures", "version": 1, "signatures": [{"kernel": "scale",
      "grid": [4, 1, 1], "block": [128, 1, 1], "pointers": 1, "args_hash": "0x1", "seen": 2,
      "intervals": [{"pointer": 0, "offset": 0, "bytes": 4, "access": "read"}]}]})";
  SignatureBook book = SignatureBook::from_json_text(v1, "v1.json");
  const analysis::SignatureKey old_key{"scale", {4, 1, 1}, {128, 1, 1}, 1, 1, false, trace::ArgsHashKind::kMix64};
  analysis::SignatureKey new_key = old_key;
  new_key.hash_kind = trace::ArgsHashKind::kXxh3;
  auto view = [](const analysis::SignatureKey& k) {
    return analysis::SignatureKeyView{k.kernel, k.grid, k.block, k.pointers, k.args_hash, k.any_args, k.hash_kind};
  };
  EXPECT_NE(book.trusted(view(old_key)), nullptr);
  EXPECT_EQ(book.trusted(view(new_key)), nullptr);
  EXPECT_EQ(book.size(trace::ArgsHashKind::kMix64), 1u);
  EXPECT_EQ(book.size(trace::ArgsHashKind::kXxh3), 0u);
  book.observe(new_key, {{0, 0, 8, AccessDir::kWrite}});
  book.observe(new_key, {{0, 0, 8, AccessDir::kWrite}});
  const std::string text = book.to_json_text();
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"args_hash_function\": \"mix64\""), std::string::npos);
  EXPECT_NE(text.find("\"args_hash_function\": \"xxh3\""), std::string::npos);
  SignatureBook again = SignatureBook::from_json_text(text, "v2.json");
  EXPECT_EQ(again.to_json_text(), text);
  ASSERT_NE(again.trusted(view(old_key)), nullptr);
  ASSERT_NE(again.trusted(view(new_key)), nullptr);
  EXPECT_EQ(again.trusted(view(old_key))->intervals[0].dir, AccessDir::kRead);
  EXPECT_EQ(again.trusted(view(new_key))->intervals[0].dir, AccessDir::kWrite);
  EXPECT_EQ(again.size(), 2u);
}

TEST(Signatures, ABadFileIsRefusedNamingTheFileAndTheFault) {
  const std::pair<std::string, std::string> cases[] = {
      {"{", "not JSON"},
      {R"({"format": "x", "version": 1, "signatures": []})", "\"format\" is not \"streamrace-signatures\""},
      {R"({"format": "streamrace-signatures", "version": 3, "signatures": []})",
       "\"version\" is not 1 or 2 (this streamrace reads versions 1 and 2)"},
      {R"({"format": "streamrace-signatures", "version": 0, "signatures": []})",
       "\"version\" is not 1 or 2 (this streamrace reads versions 1 and 2)"},
      {R"({"format": "streamrace-signatures", "version": 2, "signatures": [{"kernel": "k", "grid": [1, 1, 1], "block": [1, 1, 1],
          "pointers": 1, "args_hash": "0x1", "seen": 2, "intervals": []}]})",
       "signature 0: \"args_hash_function\" is not \"xxh3\" or \"mix64\""},
      {R"({"format": "streamrace-signatures", "version": 1, "signatures": [{"kernel": "k", "grid": [1, 1], "block": [1, 1, 1],
          "pointers": 1, "args_hash": "0x1", "seen": 2, "intervals": []}]})",
       "signature 0: \"grid\" is not 3 integers"},
      {R"({"format": "streamrace-signatures", "version": 1, "signatures": [{"kernel": "k", "grid": [1, 1, 1], "block": [1, 1, 1],
          "pointers": 1, "args_hash": "0x1", "seen": 2, "intervals": [{"pointer": 1, "offset": 0, "bytes": 4, "access": "read"}]}]})",
       "signature 0: interval pointer 1 of 1 pointers"},
      {R"({"format": "streamrace-signatures", "version": 1, "signatures": [{"kernel": "k", "grid": [1, 1, 1], "block": [1, 1, 1],
          "pointers": 1, "args_hash": "12", "seen": 2, "intervals": []}]})",
       "signature 0: \"args_hash\" \"12\" is not a hex string"},
      {R"({"format": "streamrace-signatures", "version": 1, "signatures": [{"kernel": "k", "grid": [1, 1, 1], "block": [1, 1, 1],
          "pointers": 1, "args_hash": "0x1", "seen": 2, "intervals": [{"pointer": 0, "offset": 0, "bytes": 4, "access": "touch"}]}]})",
       "signature 0: \"access\" \"touch\" is not read, write or read and write"},
  };
  for (const auto& [text, why] : cases) {
    try {
      SignatureBook::from_json_text(text, "sig.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const trace::InputFileError& e) {
      EXPECT_EQ(std::string(e.what()), "sig.json: not a signature file: " + why);
    }
  }
}

}  // namespace
}  // namespace streamrace
