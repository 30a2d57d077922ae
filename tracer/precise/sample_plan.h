// SamplePlan: which launches precise mode measures when a sample limit is set
// (`--precise-sample N`), and when a module's instrumentation can be taken out again.
//
// A patched module calls the device callback at every global access of every kernel it holds,
// measured or not; that patched code alone made the ZeRO-2 step 14.9x slower with sampling
// (bench/results/realistic.md, session 24). So once every kernel and launch shape a module has
// launched is measured N times, and `quiet_launches` more selected launches (of any module: about
// a training step's worth) brought it no new shape, the session unpatches it: its kernels run at
// full speed. (Counting the module's own launches instead left rarely launched modules patched
// for tens of steps.) A new shape of a kernel of
// an unpatched module patches it again (at most `max_repatches` times, after which it stays
// patched); that launch itself is left unmeasured (the patch is not known to reach a launch
// already being set up), the next one of the shape is measured.
//
// Pure logic, no CUDA: modules, functions and streams are opaque handles. The session calls
// it under its lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace streamrace::tracer::precise {

struct LaunchShape {
  uint64_t function = 0;
  std::array<uint32_t, 3> grid{}, block{};
  bool operator==(const LaunchShape&) const = default;
};

class SamplePlan {
 public:
  struct Options {
    uint32_t sample = 0;            // launches measured per kernel and shape; 0: every launch
    bool unpatch = true;            // take a fully sampled module's instrumentation out
    uint32_t quiet_launches = 1024;  // selected launches since a module's last measured one
    uint32_t max_repatches = 4;     // then the module stays patched
  };
  enum class Verdict {
    kMeasure,         // give the launch a slot
    kSampledOut,      // its shape is measured enough
    kRepatch,         // patch the module again (new shape); this launch is not measured
    kUnpatchedNoMeasure,  // needs measuring but its module is unpatched for good (repatch limit)
  };

  explicit SamplePlan(Options o) : o_(o) {}

  // A module the session patched (at load).
  void module_patched(uint64_t module);
  // A selected launch; `stream` is where it runs. A module the plan was not told about (the
  // session did not patch it, or patching failed) is never measured: a slot there would come
  // back empty and read as "touched nothing".
  Verdict on_launch(uint64_t module, const LaunchShape& shape, uint64_t stream);
  // A launch of a module's kernel that the session does not select or measure (another
  // kernel of a patched module, a graph's kernel node): its stream must finish before unpatching.
  void on_other_launch(uint64_t module, uint64_t stream);
  // The result of a kRepatch: true when sanitizerPatchModule succeeded.
  void repatch_done(uint64_t module, bool ok);

  // Whether streams are recorded per module (only when modules may be unpatched).
  bool tracks_streams() const { return o_.unpatch && o_.sample != 0; }
  bool has_unpatch_work() const { return !queued_.empty(); }
  struct Unpatch {
    uint64_t module;
    std::vector<uint64_t> streams;  // synchronise these before unpatching
  };
  // Modules ready to unpatch now (their state rechecked); the session synchronises the streams,
  // unpatches, and reports each with unpatch_done.
  std::vector<Unpatch> take_unpatch_work();
  void unpatch_done(uint64_t module, bool ok);
  // A stream is being destroyed: forget it (the session synchronised it).
  // Returns true when a patched module still listed it.
  bool stream_destroyed(uint64_t stream);

  uint64_t unpatched() const { return unpatched_; }
  uint64_t repatched() const { return repatched_; }
  uint64_t unmeasured_unpatched() const { return unmeasured_unpatched_; }

 private:
  struct ShapeHash {
    size_t operator()(const LaunchShape& k) const;
  };
  struct ShapeState {
    uint32_t measured = 0;
  };
  struct ModuleState {
    bool patched = false;
    bool queued = false;
    bool listed = false;      // in complete_
    uint32_t incomplete = 0;  // shapes seen and measured fewer than `sample` times
    uint64_t busy_at = 0;     // launches_ at its last measured (or re-patching) launch
    uint32_t repatches = 0;
    std::unordered_set<uint64_t> streams;
  };
  bool ready(const ModuleState& m) const;
  void queue_ready();

  Options o_;
  std::unordered_map<LaunchShape, ShapeState, ShapeHash> shapes_;
  std::unordered_map<uint64_t, ModuleState> modules_;
  std::vector<uint64_t> complete_;  // patched, every shape measured: waiting to be quiet
  std::vector<uint64_t> queued_;
  uint64_t launches_ = 0;  // selected launches so far
  uint64_t unpatched_ = 0, repatched_ = 0, unmeasured_unpatched_ = 0;
};

}  // namespace streamrace::tracer::precise
