// SamplePlan: see sample_plan.h.
#include "tracer/precise/sample_plan.h"

#include <algorithm>

namespace streamrace::tracer::precise {

size_t SamplePlan::ShapeHash::operator()(const LaunchShape& k) const {
  uint64_t h = k.function * 0x9e3779b97f4a7c15ull;
  for (uint32_t v : k.grid) h = (h ^ v) * 0x100000001b3ull;
  for (uint32_t v : k.block) h = (h ^ v) * 0x100000001b3ull;
  return size_t(h ^ (h >> 29));
}

void SamplePlan::module_patched(uint64_t module) { modules_[module].patched = true; }

bool SamplePlan::ready(const ModuleState& m) const {
  return o_.unpatch && o_.sample != 0 && m.patched && m.incomplete == 0 && m.repatches < o_.max_repatches &&
         launches_ - m.busy_at >= o_.quiet_launches;
}

// Moves the complete modules that have been quiet long enough to queued_; drops from complete_
// those that are no longer complete (a new shape) or no longer patched.
void SamplePlan::queue_ready() {
  size_t keep = 0;
  for (uint64_t module : complete_) {
    ModuleState& m = modules_[module];
    if (!m.patched || m.incomplete != 0 || m.repatches >= o_.max_repatches) {
      m.listed = false;
    } else if (ready(m)) {
      m.listed = false;
      m.queued = true;
      queued_.push_back(module);
    } else {
      complete_[keep++] = module;
    }
  }
  complete_.resize(keep);
}

SamplePlan::Verdict SamplePlan::on_launch(uint64_t module, const LaunchShape& shape, uint64_t stream) {
  ++launches_;
  auto mit = modules_.find(module);
  if (mit == modules_.end()) {
    ++unmeasured_unpatched_;
    return Verdict::kUnpatchedNoMeasure;
  }
  ModuleState& m = mit->second;
  if (tracks_streams()) m.streams.insert(stream);
  if (o_.sample == 0) {
    if (m.patched) return Verdict::kMeasure;
    ++unmeasured_unpatched_;
    return Verdict::kUnpatchedNoMeasure;
  }
  Verdict v;
  auto [sit, fresh] = shapes_.try_emplace(shape);
  ShapeState& s = sit->second;
  if (fresh) ++m.incomplete;
  if (s.measured >= o_.sample) {
    v = Verdict::kSampledOut;
  } else if (!m.patched) {
    if (m.repatches >= o_.max_repatches) {
      ++unmeasured_unpatched_;
      v = Verdict::kUnpatchedNoMeasure;
    } else {
      ++m.repatches;
      m.busy_at = launches_;
      v = Verdict::kRepatch;
    }
  } else {
    m.busy_at = launches_;
    if (++s.measured == o_.sample) --m.incomplete;
    v = Verdict::kMeasure;
  }
  if (tracks_streams()) {
    if (m.patched && m.incomplete == 0 && !m.listed && !m.queued) {
      m.listed = true;
      complete_.push_back(module);
    }
    queue_ready();
  }
  return v;
}

void SamplePlan::on_other_launch(uint64_t module, uint64_t stream) {
  auto mit = modules_.find(module);
  if (tracks_streams() && mit != modules_.end() && mit->second.patched) mit->second.streams.insert(stream);
}

void SamplePlan::repatch_done(uint64_t module, bool ok) {
  auto mit = modules_.find(module);
  if (mit == modules_.end()) return;
  if (ok) {
    mit->second.patched = true;
    mit->second.busy_at = launches_;
    ++repatched_;
  } else {
    mit->second.repatches = o_.max_repatches;  // do not try again
  }
}

std::vector<SamplePlan::Unpatch> SamplePlan::take_unpatch_work() {
  std::vector<Unpatch> out;
  for (uint64_t module : queued_) {
    auto mit = modules_.find(module);
    if (mit == modules_.end()) continue;
    ModuleState& m = mit->second;
    m.queued = false;
    // A new shape may have arrived since the module was queued.
    if (!ready(m)) continue;
    Unpatch u{module, {m.streams.begin(), m.streams.end()}};
    std::sort(u.streams.begin(), u.streams.end());
    out.push_back(std::move(u));
  }
  queued_.clear();
  return out;
}

void SamplePlan::unpatch_done(uint64_t module, bool ok) {
  auto mit = modules_.find(module);
  if (mit == modules_.end()) return;
  ModuleState& m = mit->second;
  if (!ok) {
    m.repatches = o_.max_repatches;  // an unpatch that failed is not retried: the module stays patched
    return;
  }
  m.patched = false;
  m.streams.clear();
  ++unpatched_;
}

bool SamplePlan::stream_destroyed(uint64_t stream) {
  bool listed = false;
  for (auto& [module, m] : modules_)
    if (m.streams.erase(stream) && m.patched) listed = true;
  return listed;
}

}  // namespace streamrace::tracer::precise
