// The tracer settings contract (tracer/tracer_settings.h): the STREAMRACE_OPTIONS syntax and
// the precedence of STREAMRACE_<NAME> over it, read through a fake environment.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tracer/tracer_settings.h"

namespace streamrace::tracer {
namespace {

std::map<std::string, std::string> g_env;
char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.data();
}

TEST(TracerSettings, OptionsStringIsKeyValueWordsWithQuotes) {
  auto p = parse_tracer_options("  stacks=none\ttiming=1 out='/tmp/a b' precise-start=init precise=\"regex:x y\"  ");
  ASSERT_EQ(p.error, "");
  ASSERT_EQ(p.values.size(), 5u);
  EXPECT_STREQ(p.values[0].first->env, "STREAMRACE_STACKS");
  EXPECT_EQ(p.values[0].second, "none");
  EXPECT_EQ(p.values[1].second, "1");
  EXPECT_EQ(p.values[2].second, "/tmp/a b");
  EXPECT_STREQ(p.values[3].first->key, "precise_start");
  EXPECT_EQ(p.values[4].second, "regex:x y");
  EXPECT_TRUE(parse_tracer_options("").values.empty());
}

TEST(TracerSettings, MalformedOptionsSayWhatIsWrong) {
  EXPECT_EQ(parse_tracer_options("stacks").error, "'stacks' is not KEY=VALUE");
  EXPECT_EQ(parse_tracer_options("stack=none").error,
            "unknown setting 'stack' (known: out stacks python_sites native_unwind kernel_signatures launch_memo defer_scan timing runtime_launches "
            "host_accesses torch_allocator step_range steps window ring launch_corpus self_time bench_cut chunk_kib host_clock disable precise precise_start precise_patches "
            "precise_module_filter precise_debug precise_sample precise_unpatch precise_graph_nodes)");
  EXPECT_EQ(parse_tracer_options("out='/tmp").error, "the value of 'out' has no closing quote");
  EXPECT_EQ(parse_tracer_options("out='/a'b").error, "blank expected after the quoted value of 'out'");
}

TEST(TracerSettings, VariableWinsOverOptionsWhichWinOverTheDefault) {
  g_env = {{"STREAMRACE_OPTIONS", "stacks=none timing=1 stacks=python"}, {"STREAMRACE_TIMING", "0"}};
  EXPECT_EQ(tracer_setting("stacks", fake_getenv).value_or("auto"), "python");  // the later word
  EXPECT_FALSE(tracer_flag("timing", fake_getenv));                            // the variable
  EXPECT_FALSE(tracer_setting("out", fake_getenv).has_value());                 // the default
  g_env["STREAMRACE_TIMING"] = "";  // empty counts as unset
  EXPECT_TRUE(tracer_flag("timing", fake_getenv));
  g_env = {{"STREAMRACE_OPTIONS", "stacks=none bogus=1"}};  // a bad string gives nothing
  EXPECT_FALSE(tracer_setting("stacks", fake_getenv).has_value());
}

}  // namespace
}  // namespace streamrace::tracer
