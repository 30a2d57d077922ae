// What part of a run the tracer writes (docs/long-runs.md): everything (the default), a
// window (`steps=A:B`, inside an NVTX range, between cudaProfilerStart and cudaProfilerStop),
// or a ring of the last N steps. Steps are counted by a step marker: each push of the NVTX
// range named by `step_range`. Header-only and plain C++: `streamrace run` validates the
// settings with the same code before it starts the command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace streamrace::tracer {

struct CaptureOptions {
  enum class Window : uint8_t { kAll, kSteps, kNvtxRange, kProfiler };
  Window window = Window::kAll;
  uint64_t first_step = 0;       // kSteps: steps [first_step, end_step) are written
  uint64_t end_step = ~0ull;
  std::string range;             // kNvtxRange: written while a range of this name is open
  uint32_t ring = 0;             // > 0: keep only the last `ring` steps
  std::string step_range;        // the NVTX range whose push starts a step ("" = no step marker)

  bool active() const { return window != Window::kAll || ring > 0; }
  bool wants_nvtx() const { return !step_range.empty() || window == Window::kNvtxRange; }
  // "steps 3:5", "nvtx range 'train'", "profiler", "ring 8"; "" when not active.
  std::string describe() const {
    std::string d;
    switch (window) {
      case Window::kAll: break;
      case Window::kSteps:
        d = "steps " + std::to_string(first_step) + ":" + (end_step == ~0ull ? std::string() : std::to_string(end_step));
        break;
      case Window::kNvtxRange: d = "nvtx range '" + range + "'"; break;
      case Window::kProfiler: d = "profiler"; break;
    }
    if (ring) d += (d.empty() ? "" : ", ") + std::string("ring ") + std::to_string(ring);
    return d;
  }
};

namespace capture_detail {
inline bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + uint64_t(c - '0');
  }
  return true;
}
}  // namespace capture_detail

// The settings `steps` ("A:B", "A:" or ""), `window` ("nvtx:NAME", "profiler" or ""), `ring`
// ("N" or "", N >= 1) and `step_range` (a range name). nullopt and `error` set when one does
// not parse or they do not go together.
inline std::optional<CaptureOptions> parse_capture_options(std::string_view steps, std::string_view window,
                                                           std::string_view ring, std::string_view step_range,
                                                           std::string* error) {
  using capture_detail::parse_u64;
  CaptureOptions o;
  o.step_range = std::string(step_range);
  auto fail = [&](std::string why) -> std::optional<CaptureOptions> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (!steps.empty()) {
    size_t colon = steps.find(':');
    if (colon == std::string_view::npos)
      return fail("steps '" + std::string(steps) + "' is not A:B (steps A to B-1, counted from 0) or A:");
    std::string_view a = steps.substr(0, colon), b = steps.substr(colon + 1);
    uint64_t first = 0, end = ~0ull;
    if (!parse_u64(a, first) || (!b.empty() && !parse_u64(b, end)))
      return fail("steps '" + std::string(steps) + "': A and B must be step numbers (A:B or A:)");
    if (end <= first) return fail("steps '" + std::string(steps) + "' is empty (B must be greater than A)");
    o.window = CaptureOptions::Window::kSteps;
    o.first_step = first;
    o.end_step = end;
  }
  if (!window.empty()) {
    if (o.window != CaptureOptions::Window::kAll) return fail("steps and window cannot be combined: choose one window");
    if (window == "profiler") {
      o.window = CaptureOptions::Window::kProfiler;
    } else if (window.substr(0, 5) == "nvtx:" && window.size() > 5) {
      o.window = CaptureOptions::Window::kNvtxRange;
      o.range = std::string(window.substr(5));
    } else {
      return fail("window '" + std::string(window) + "' is not nvtx:NAME or profiler");
    }
  }
  if (!ring.empty()) {
    uint64_t n = 0;
    if (!parse_u64(ring, n) || n < 1 || n > 1000000)
      return fail("ring '" + std::string(ring) + "' is not a number of steps from 1 to 1000000");
    if (o.window != CaptureOptions::Window::kAll)
      return fail("ring cannot be combined with a window (steps, nvtx, profiler): a ring keeps the last N steps");
    o.ring = uint32_t(n);
  }
  if ((o.window == CaptureOptions::Window::kSteps || o.ring) && o.step_range.empty())
    return fail(std::string(o.ring ? "ring" : "steps") +
                " counts steps: name the step marker with step_range=NAME (the NVTX range pushed once per step)");
  return o;
}

}  // namespace streamrace::tracer
