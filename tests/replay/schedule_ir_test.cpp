// Schedule IR: JSON round trip, validation messages, timeline.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "replay/schedule.h"
#include "replay/timeline.h"
#include "replay/zero_schedule.h"

using namespace streamrace::replay;

namespace {

ZeroConfig tiny(int stage, const std::string& variant) {
  ZeroConfig c;
  c.stage = stage;
  apply_zero_preset("tiny", c);
  EXPECT_TRUE(set_zero_variant(c, variant));
  return c;
}

}  // namespace

TEST(ScheduleJson, RoundTripIsExactForEveryGeneratedVariant) {
  for (int stage : {1, 2, 3}) {
    for (const auto& v : zero_variant_names(stage)) {
      auto c = tiny(stage, v);
      c.delay_ns = 5000;
      Schedule s = make_zero_schedule(c);
      std::string text = schedule_to_json_text(s);
      Schedule back = schedule_from_json_text(text);
      EXPECT_EQ(schedule_to_json_text(back), text) << s.name;
      EXPECT_EQ(back.actions.size(), s.actions.size());
      EXPECT_EQ(back.expectations.size(), s.expectations.size());
      EXPECT_EQ(back.meta.at("variant"), v);
    }
  }
}

TEST(ScheduleJson, RoundTripKeepsLiftedFields) {
  Schedule s;
  s.name = "lifted";
  s.add_stream("legacy default", StreamKind::kLegacyDefault, 0xFFFFFFFF00000000ull);
  uint32_t b = s.add_buffer("alloc 0x7f00", 64, "allocation", 0x7f00, "pinned-host");
  Action a;
  a.kind = ActionKind::kCompute;
  a.stream = 0;
  a.label = "kernel k";
  a.reads = {ByteRange{b, 0, 64}};
  a.writes = {ByteRange{b, 0, 64}};
  a.api = "k";
  a.source_seq = 17;
  a.kernel_ptrs = {0x7f00};
  a.exact = false;
  a.host_blocking = true;
  a.stack = {Site{"train.py", "step", 12, true}, Site{"libfoo.so", "", 0, false}};
  s.actions.push_back(a);
  Schedule back = schedule_from_json_text(schedule_to_json_text(s));
  ASSERT_EQ(back.actions.size(), 1u);
  const Action& r = back.actions[0];
  EXPECT_EQ(r.source_seq, 17u);
  EXPECT_EQ(r.kernel_ptrs, std::vector<uint64_t>{0x7f00});
  EXPECT_FALSE(r.exact);
  EXPECT_TRUE(r.host_blocking);
  EXPECT_EQ(r.stack, a.stack);
  EXPECT_EQ(back.buffers[0].alloc, "pinned-host");
  EXPECT_EQ(back.buffers[0].address, 0x7f00u);
  EXPECT_EQ(back.streams[0].handle, 0xFFFFFFFF00000000ull);
}

TEST(ScheduleJson, RejectsForeignAndMalformedDocuments) {
  EXPECT_THROW(schedule_from_json_text("{"), std::runtime_error);
  EXPECT_THROW(schedule_from_json_text(R"({"schema":"other"})"), std::runtime_error);
  Schedule s = make_zero_schedule(tiny(1, "none"));
  nlohmann::json j = nlohmann::json::parse(schedule_to_json_text(s));
  j["actions"][3]["kind"] = "teleport";
  try {
    schedule_from_json_text(j.dump());
    FAIL() << "accepted an unknown action kind";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("teleport"), std::string::npos) << e.what();
  }
  j = nlohmann::json::parse(schedule_to_json_text(s));
  j["actions"][1]["writes"][0][2] = 1 << 20;  // past the end of its buffer
  try {
    schedule_from_json_text(j.dump());
    FAIL() << "accepted an out-of-range write";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("outside buffer"), std::string::npos) << e.what();
  }
}

TEST(ScheduleValidate, NamesEachProblem) {
  Schedule s;
  s.world = 2;
  s.rank = 0;
  s.add_stream("c", StreamKind::kNonBlocking);
  uint32_t a = s.add_buffer("a", 16, "temp"), b = s.add_buffer("b", 16, "temp");
  Action copy;
  copy.kind = ActionKind::kCopy;
  copy.stream = 0;
  copy.label = "bad copy";
  copy.reads = {ByteRange{a, 0, 8}};
  copy.writes = {ByteRange{b, 0, 4}};
  s.actions.push_back(copy);
  Action rs;
  rs.kind = ActionKind::kCollective;
  rs.collective = CollectiveKind::kReduceScatter;
  rs.stream = 0;
  rs.label = "bad rs";
  rs.reads = {ByteRange{a, 0, 16}};
  rs.writes = {ByteRange{b, 0, 16}};
  s.actions.push_back(rs);
  Action wait;
  wait.kind = ActionKind::kStreamWait;
  wait.stream = 0;
  wait.event = 3;
  wait.label = "bad wait";
  s.actions.push_back(wait);
  auto errs = s.validate();
  ASSERT_EQ(errs.size(), 3u);
  EXPECT_NE(errs[0].find("copy of 8 bytes into 4 bytes"), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find("reduce-scatter with 16 send bytes and 16 receive bytes on 2 ranks"), std::string::npos)
      << errs[1];
  EXPECT_NE(errs[2].find("no event 3"), std::string::npos) << errs[2];
}

TEST(Timeline, PutsEachActionInItsStreamColumn) {
  Schedule s = make_zero_schedule(tiny(1, "event"));
  std::ostringstream out;
  print_timeline(out, s, TimelineOptions{40, true});
  std::string text = out.str();
  EXPECT_NE(text.find("compute (legacy-default)"), std::string::npos);
  EXPECT_NE(text.find("reduction (non-blocking)"), std::string::npos);
  EXPECT_NE(text.find("-- flush 0 --"), std::string::npos);
  EXPECT_NE(text.find("writes ipg_buffer[0][0, 4)"), std::string::npos);
  // The event fix's wait sits in the compute column, after the host column.
  std::istringstream lines(text);
  std::string line;
  bool saw_wait = false;
  while (std::getline(lines, line)) {
    auto pos = line.find("compute waits on ipg_event[0]");
    if (pos == std::string::npos) continue;
    saw_wait = true;
    EXPECT_GT(pos, 40u) << line;
  }
  EXPECT_TRUE(saw_wait) << text;
}
