// CPU stream simulator and exhaustive interleaving search (see stream_simulator.h).
#include "replay/stream_simulator.h"

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>

#include "replay/gradient_values.h"
#include "replay/timeline.h"

namespace streamrace::replay {

const char* to_string(SimPolicy p) {
  switch (p) {
    case SimPolicy::kProgramOrder: return "program-order";
    case SimPolicy::kRandom: return "random";
    case SimPolicy::kAdversarial: return "adversarial";
    case SimPolicy::kTimed: return "timed";
  }
  return "?";
}

const char* to_string(SearchResult::Verdict v) {
  switch (v) {
    case SearchResult::Verdict::kCorruptionFound: return "corruption found";
    case SearchResult::Verdict::kNoCorruption: return "no corrupting interleaving exists";
    case SearchResult::Verdict::kInconclusive: return "inconclusive (state limit reached)";
  }
  return "?";
}

namespace {

constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Span {
  uint64_t begin = 0, end = 0;  // global cell indices
  bool overlaps(const Span& o) const { return begin < o.end && o.begin < end; }
};

using Dep = std::pair<uint32_t, uint32_t>;  // (stream, ticket): satisfied once that item finished

struct Item {
  uint32_t action = 0;
  std::vector<Dep> deps;
  bool memory = false;  // reads or writes memory (else a marker: record, wait, spin)
  std::vector<Span> reads, writes;
};

struct HostStep {
  uint32_t action = 0;
  int32_t issue_stream = -1;  // >= 0: this step issues the next item of that stream
  std::vector<Dep> gate;      // the host waits for these before it moves on
  uint32_t alloc_buffer = kNone;  // a kAlloc: this buffer gets fresh (poison) contents
  uint32_t alloc_ordinal = 0;     // which allocation of the program it is (1, 2, ...)
};

struct Machine {
  uint32_t host_pc = 0;
  std::vector<uint32_t> completed;
  std::vector<uint8_t> started;
  std::vector<std::vector<uint64_t>> pending;
  std::vector<uint64_t> mem;
};

}  // namespace

struct StreamSimulator::Impl {
  Schedule s;
  uint64_t cb = 1;  // cell bytes
  std::vector<uint64_t> buffer_cell_base;
  uint64_t ncells = 0;
  std::vector<std::vector<Item>> items;  // per stream
  std::vector<HostStep> host;
  std::vector<std::vector<uint32_t>> issued_upto;  // [host_pc][stream]
  std::vector<int32_t> collective_ordinal;         // per action, -1 if not a collective
  uint32_t ncollectives = 0;
  std::vector<uint8_t> written;  // cells some op writes (for comparison with program order)
  std::vector<uint8_t> live_at_end;  // per buffer: a freed buffer's last contents are not compared

  // Per step: the other ranks' send data per collective, and the program-order result.
  int64_t cached_step = -1;
  std::vector<std::vector<std::vector<uint64_t>>> contrib;  // [collective][rank][cell]
  std::vector<uint64_t> reference_mem;

  Span span(const ByteRange& r) const {
    uint64_t b = buffer_cell_base[r.buffer] + r.offset / cb;
    return Span{b, b + r.bytes / cb};
  }

  void build(uint64_t max_cells) {
    auto errs = s.validate();
    if (!errs.empty()) throw std::invalid_argument("schedule is not well formed: " + errs.front());
    cb = s.cell_bytes();
    for (const auto& b : s.buffers) {
      buffer_cell_base.push_back(ncells);
      ncells += b.bytes / cb;
    }
    // Refused before anything is sized by the cells (a recorded trace can need 10^9 of them).
    if (ncells > max_cells)
      throw std::invalid_argument(fmt::format("schedule needs {} memory cells of {} bytes; the simulator allows {}",
                                              ncells, cb, max_cells));
    if (!s.expectations.empty() && cb != s.elem_bytes)
      throw std::invalid_argument(fmt::format("schedule has expectations but ranges are not whole {}-byte elements",
                                              s.elem_bytes));
    const uint32_t ns = uint32_t(s.streams.size());
    items.assign(ns, {});
    written.assign(ncells, 0);
    collective_ordinal.assign(s.actions.size(), -1);
    std::vector<std::pair<bool, Dep>> event_record(s.events.size(), {false, {0, 0}});
    int32_t legacy = -1;
    for (uint32_t i = 0; i < ns; ++i)
      if (s.streams[i].kind == StreamKind::kLegacyDefault) legacy = int32_t(i);
    std::vector<uint32_t> issued(ns, 0);
    auto tail = [&](uint32_t st) { return Dep{st, issued[st] - 1}; };
    auto all_streams_gate = [&]() {
      std::vector<Dep> g;
      for (uint32_t st = 0; st < ns; ++st)
        if (issued[st]) g.push_back(tail(st));
      return g;
    };
    live_at_end = s.live_at_end();
    uint32_t allocs = 0;
    for (uint32_t ai = 0; ai < s.actions.size(); ++ai) {
      const auto& a = s.actions[ai];
      if (a.kind == ActionKind::kCollective) collective_ordinal[ai] = int32_t(ncollectives++);
      if (is_lifetime(a.kind)) {
        // cudaFree synchronises the device before it releases the memory; a (re-)allocation
        // has undefined contents. validate() guarantees that no op touches a dead buffer, so
        // nothing in flight can see either.
        HostStep h;
        h.action = ai;
        if (a.kind == ActionKind::kFree) h.gate = all_streams_gate();
        if (a.kind == ActionKind::kAlloc) {
          h.alloc_buffer = a.buffer;
          h.alloc_ordinal = ++allocs;
        }
        host.push_back(std::move(h));
        continue;
      }
      if (is_host_sync(a.kind)) {
        HostStep h;
        h.action = ai;
        if (a.kind == ActionKind::kStreamSync) {
          if (issued[a.stream]) h.gate.push_back(tail(a.stream));
        } else if (a.kind == ActionKind::kEventSync) {
          if (event_record[a.event].first) h.gate.push_back(event_record[a.event].second);
        } else {
          h.gate = all_streams_gate();
        }
        host.push_back(std::move(h));
        continue;
      }
      Item it;
      it.action = ai;
      const uint32_t st = a.stream;
      if (legacy >= 0 && s.streams[st].kind != StreamKind::kNonBlocking) {
        // Legacy default stream: waits for prior work of blocking streams and is waited on by
        // later work of blocking streams; non-blocking streams are exempt.
        if (int32_t(st) == legacy) {
          for (uint32_t o = 0; o < ns; ++o)
            if (o != st && s.streams[o].kind == StreamKind::kBlocking && issued[o]) it.deps.push_back(tail(o));
        } else if (issued[legacy]) {
          it.deps.push_back(tail(uint32_t(legacy)));
        }
      }
      if (a.kind == ActionKind::kStreamWait && event_record[a.event].first)
        it.deps.push_back(event_record[a.event].second);
      it.memory = touches_memory(a.kind);
      for (const auto& r : a.reads) it.reads.push_back(span(r));
      for (const auto& r : a.writes) {
        it.writes.push_back(span(r));
        auto sp = span(r);
        std::fill(written.begin() + sp.begin, written.begin() + sp.end, 1);
      }
      const uint32_t ticket = issued[st]++;
      items[st].push_back(std::move(it));
      if (a.kind == ActionKind::kEventRecord) event_record[a.event] = {true, Dep{st, ticket}};
      HostStep h;
      h.action = ai;
      h.issue_stream = int32_t(st);
      if (a.host_blocking) h.gate.push_back(Dep{st, ticket});
      host.push_back(std::move(h));
    }
    issued_upto.assign(host.size() + 1, std::vector<uint32_t>(ns, 0));
    for (size_t k = 0; k < host.size(); ++k) {
      issued_upto[k + 1] = issued_upto[k];
      if (host[k].issue_stream >= 0) issued_upto[k + 1][host[k].issue_stream]++;
    }
  }

  uint64_t poison(uint64_t cell, uint32_t step, uint32_t alloc_ordinal = 0) const {
    return 0xBAD0'0000'0000ull | (mix64(cell * 131 + step + uint64_t(alloc_ordinal) * 0x9e3779b97f4a7c15ull) & 0xFFFFFFFF);
  }
  // The host's own effect when it passes a step: a (re-)allocation gets new poison contents.
  void host_effect(const HostStep& h, std::vector<uint64_t>& mem, uint32_t step) const {
    if (h.alloc_buffer == kNone) return;
    const uint64_t base = buffer_cell_base[h.alloc_buffer];
    for (uint64_t c = base; c < base + s.buffers[h.alloc_buffer].bytes / cb; ++c) mem[c] = poison(c, step, h.alloc_ordinal);
  }

  Machine fresh(uint32_t step) const {
    Machine m;
    m.completed.assign(s.streams.size(), 0);
    m.started.assign(s.streams.size(), 0);
    m.pending.assign(s.streams.size(), {});
    m.mem.resize(ncells);
    for (uint64_t c = 0; c < ncells; ++c) m.mem[c] = poison(c, step);
    return m;
  }

  static bool dep_done(const Machine& m, const Dep& d) { return m.completed[d.first] > d.second; }
  bool gate_open(const Machine& m, const HostStep& h) const {
    for (const auto& d : h.gate)
      if (!dep_done(m, d)) return false;
    return true;
  }
  uint32_t issued(const Machine& m, uint32_t st) const { return issued_upto[m.host_pc][st]; }
  bool has_head(const Machine& m, uint32_t st) const { return m.completed[st] < issued(m, st); }
  const Item& head(const Machine& m, uint32_t st) const { return items[st][m.completed[st]]; }
  bool can_start(const Machine& m, uint32_t st) const {
    if (!has_head(m, st) || m.started[st]) return false;
    for (const auto& d : head(m, st).deps)
      if (!dep_done(m, d)) return false;
    return true;
  }
  bool done(const Machine& m) const {
    if (m.host_pc < host.size()) return false;
    for (uint32_t st = 0; st < s.streams.size(); ++st)
      if (m.completed[st] < items[st].size()) return false;
    return true;
  }

  // The values an op writes, computed from memory when it starts. `rank` selects the
  // gradient values; `others` are the other ranks' send cells per collective (may be null:
  // then the op must not be a collective).
  std::vector<uint64_t> compute(const Item& it, const std::vector<uint64_t>& mem, uint32_t step, int rank,
                                const std::vector<std::vector<std::vector<uint64_t>>>* others) const {
    const Action& a = s.actions[it.action];
    std::vector<uint64_t> out;
    const uint64_t world = uint64_t(s.world);
    switch (a.kind) {
      case ActionKind::kProduce: {
        const auto& w = it.writes[0];
        for (uint64_t c = 0; c < w.end - w.begin; ++c)
          out.push_back(gradient_value(a.param, a.param_offset + c, uint64_t(rank), step, world));
        break;
      }
      case ActionKind::kCopy:
      case ActionKind::kCopyBack:
        out.assign(mem.begin() + it.reads[0].begin, mem.begin() + it.reads[0].end);
        break;
      case ActionKind::kDivide:
        for (uint64_t c = it.reads[0].begin; c < it.reads[0].end; ++c) out.push_back(mem[c] / a.divisor);
        break;
      case ActionKind::kMemset:
        out.assign(it.writes[0].end - it.writes[0].begin, a.fill);
        break;
      case ActionKind::kCompute: {
        uint64_t h = mix64(it.action * 0x100000001b3ull + uint64_t(rank) * 7 + step);
        for (const auto& r : it.reads)
          for (uint64_t c = r.begin; c < r.end; ++c) h = mix64(h ^ mem[c]);
        for (const auto& w : it.writes)
          for (uint64_t c = 0; c < w.end - w.begin; ++c) out.push_back(mix64(h + c) & 0xFF'FFFF'FFFFull);
        break;
      }
      case ActionKind::kCollective: {
        const auto& send = it.reads[0];
        const auto& recv = it.writes[0];
        const auto& mine_and_others = (*others)[size_t(collective_ordinal[it.action])];
        auto sent = [&](int r, uint64_t c) -> uint64_t {
          return r == rank ? mem[send.begin + c] : mine_and_others[size_t(r)][c];
        };
        const uint64_t nrecv = recv.end - recv.begin;
        out.resize(nrecv);
        if (a.collective == CollectiveKind::kAllReduce) {
          for (uint64_t c = 0; c < nrecv; ++c) {
            uint64_t v = 0;
            for (int r = 0; r < s.world; ++r) v += sent(r, c);
            out[c] = v;
          }
        } else if (a.collective == CollectiveKind::kReduceScatter) {
          for (uint64_t c = 0; c < nrecv; ++c) {
            uint64_t v = 0;
            for (int r = 0; r < s.world; ++r) v += sent(r, uint64_t(rank) * nrecv + c);
            out[c] = v;
          }
        } else {
          const uint64_t nsend = send.end - send.begin;
          for (int r = 0; r < s.world; ++r)
            for (uint64_t c = 0; c < nsend; ++c) out[uint64_t(r) * nsend + c] = sent(r, c);
        }
        break;
      }
      default:
        break;
    }
    return out;
  }

  static void apply(const Item& it, const std::vector<uint64_t>& vals, std::vector<uint64_t>& mem) {
    size_t k = 0;
    for (const auto& w : it.writes)
      for (uint64_t c = w.begin; c < w.end && k < vals.size(); ++c) mem[c] = vals[k++];
  }

  // Program order for every rank in lockstep: gives the other ranks' contributions and the
  // intended result of this rank.
  void prepare_step(uint32_t step) {
    if (cached_step == int64_t(step)) return;
    const int world = s.world;
    auto mems = std::vector<std::vector<uint64_t>>(size_t(world));
    for (int r = 0; r < world; ++r) mems[size_t(r)] = fresh(step).mem;
    contrib.assign(ncollectives, std::vector<std::vector<uint64_t>>(size_t(world)));
    std::vector<uint32_t> next(s.streams.size(), 0);
    for (const auto& h : host) {
      for (auto& mem : mems) host_effect(h, mem, step);
      if (h.issue_stream < 0) continue;
      const Item& it = items[size_t(h.issue_stream)][next[size_t(h.issue_stream)]++];
      if (!it.memory) continue;
      const Action& a = s.actions[it.action];
      if (a.kind == ActionKind::kCollective) {
        auto& c = contrib[size_t(collective_ordinal[it.action])];
        for (int r = 0; r < world; ++r)
          c[size_t(r)].assign(mems[size_t(r)].begin() + it.reads[0].begin, mems[size_t(r)].begin() + it.reads[0].end);
      }
      auto outs = std::vector<std::vector<uint64_t>>(size_t(world));
      for (int r = 0; r < world; ++r) outs[size_t(r)] = compute(it, mems[size_t(r)], step, r, &contrib);
      for (int r = 0; r < world; ++r) apply(it, outs[size_t(r)], mems[size_t(r)]);
    }
    reference_mem = mems[size_t(s.rank)];
    cached_step = step;
  }

  void check(const Machine& m, uint32_t step, StepOutcome& o) const {
    auto note = [&](std::string where, std::string what, uint64_t exp, uint64_t got) {
      ++o.corrupted_cells;
      if (o.cells.size() < 8) o.cells.push_back(CorruptCell{std::move(where), std::move(what), exp, got});
    };
    if (!s.expectations.empty()) {
      for (const auto& e : s.expectations) {
        Span sp = span(e.range);
        for (uint64_t c = sp.begin; c < sp.end; ++c) {
          uint64_t exp = reduced_gradient(e.param, e.param_offset + (c - sp.begin), step, uint64_t(s.world));
          if (m.mem[c] != exp) {
            uint64_t off = e.range.offset + (c - sp.begin) * cb;
            note(describe_range(s, ByteRange{e.range.buffer, off, cb}), e.label, exp, m.mem[c]);
          }
        }
      }
    } else {
      for (uint32_t b = 0; b < s.buffers.size(); ++b) {
        if (!live_at_end[b]) continue;
        for (uint64_t c = buffer_cell_base[b]; c < buffer_cell_base[b] + s.buffers[b].bytes / cb; ++c) {
          if (!written[c] || m.mem[c] == reference_mem[c]) continue;
          uint64_t off = (c - buffer_cell_base[b]) * cb;
          note(describe_range(s, ByteRange{b, off, cb}), "program-order result", reference_mem[c], m.mem[c]);
        }
      }
    }
    o.corrupted = o.corrupted_cells > 0;
  }

  // Host steps and marker items (no memory effect) never need to be interleaved: taking them
  // as early as possible only enables more behaviour.
  void advance_eager(Machine& m, std::vector<SimTransition>* order, uint32_t step) const {
    bool moved = true;
    while (moved) {
      moved = false;
      while (m.host_pc < host.size() && gate_open(m, host[m.host_pc])) {
        host_effect(host[m.host_pc], m.mem, step);
        ++m.host_pc;
        moved = true;
      }
      for (uint32_t st = 0; st < s.streams.size(); ++st) {
        while (can_start(m, st) && !head(m, st).memory) {
          if (order) order->push_back(SimTransition{st, head(m, st).action, true});
          ++m.completed[st];
          moved = true;
        }
      }
    }
  }

  void start(Machine& m, uint32_t st, uint32_t step) const {
    m.pending[st] = compute(head(m, st), m.mem, step, s.rank, &contrib);
    m.started[st] = 1;
  }
  void finish(Machine& m, uint32_t st) const {
    apply(head(m, st), m.pending[st], m.mem);
    m.pending[st].clear();
    m.started[st] = 0;
    ++m.completed[st];
  }

  // Candidate transitions: (stream, finish?).
  void enabled(const Machine& m, std::vector<SimTransition>& out) const {
    out.clear();
    for (uint32_t st = 0; st < s.streams.size(); ++st) {
      if (!has_head(m, st)) continue;
      if (m.started[st])
        out.push_back(SimTransition{st, head(m, st).action, true});
      else if (can_start(m, st))
        out.push_back(SimTransition{st, head(m, st).action, false});
    }
  }

  // True when transition t conflicts with nothing any other stream can still do: then it
  // commutes with every other transition and may be taken alone (a persistent set of one).
  bool independent(const Machine& m, const SimTransition& t) const {
    const Item& it = head(m, t.stream);
    const auto& mine = t.finish ? it.writes : it.reads;
    for (uint32_t o = 0; o < s.streams.size(); ++o) {
      if (o == t.stream) continue;
      for (uint32_t k = m.completed[o]; k < items[o].size(); ++k) {
        const Item& other = items[o][k];
        if (!other.memory) continue;
        const bool other_started = k == m.completed[o] && m.started[o];
        for (const auto& a : mine) {
          for (const auto& w : other.writes)
            if (a.overlaps(w)) return false;
          if (t.finish && !other_started)
            for (const auto& r : other.reads)
              if (a.overlaps(r)) return false;
        }
      }
    }
    return true;
  }

  void take(Machine& m, const SimTransition& t, uint32_t step) const {
    if (t.finish)
      finish(m, t.stream);
    else
      start(m, t.stream, step);
  }

  std::pair<uint64_t, uint64_t> key(const Machine& m) const {
    uint64_t a = mix64(m.host_pc), b = mix64(m.host_pc ^ 0x5555);
    auto add = [&](uint64_t v) {
      a = mix64(a ^ v);
      b = mix64(b + v * 0x9e3779b97f4a7c15ull);
    };
    for (size_t st = 0; st < m.completed.size(); ++st) {
      add(m.completed[st] * 2 + m.started[st]);
      for (auto v : m.pending[st]) add(v);
    }
    for (auto v : m.mem) add(v);
    return {a, b};
  }

  struct KeyHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& k) const { return size_t(k.first ^ (k.second * 31)); }
  };

  // Depth-first search over interleavings. Returns true when a corrupting one was found.
  bool dfs(Machine& m, uint32_t step, const SearchLimits& lim, SearchResult& res,
           std::unordered_set<std::pair<uint64_t, uint64_t>, KeyHash>& seen, std::vector<SimTransition>& path,
           bool& out_of_budget) const {
    // Take independent transitions eagerly (partial-order reduction), then branch.
    std::vector<SimTransition> cand;
    for (;;) {
      advance_eager(m, nullptr, step);
      enabled(m, cand);
      bool took = false;
      if (!lim.partial_order_reduction) break;
      for (const auto& t : cand) {
        if (independent(m, t)) {
          path.push_back(t);
          take(m, t, step);
          ++res.transitions;
          took = true;
          break;
        }
      }
      if (!took) break;
    }
    if (!seen.insert(key(m)).second) return false;
    ++res.states;
    if (res.states > lim.max_states) {
      out_of_budget = true;
      return false;
    }
    if (cand.empty()) {
      StepOutcome o;
      if (!done(m)) {
        o.deadlock = true;
      } else {
        check(m, step, o);
      }
      if (o.corrupted || o.deadlock) {
        res.outcome = o;
        return true;
      }
      return false;
    }
    for (const auto& t : cand) {
      Machine next = m;
      const size_t mark = path.size();
      path.push_back(t);
      take(next, t, step);
      ++res.transitions;
      if (dfs(next, step, lim, res, seen, path, out_of_budget)) return true;
      path.resize(mark);
      if (out_of_budget) return false;
    }
    return false;
  }

  uint64_t cost(const Action& a) const {
    if (a.kind == ActionKind::kSpin) return a.spin_ns;
    if (a.cost_ns) return a.cost_ns;
    uint64_t bytes = 0;
    for (const auto& r : a.writes) bytes += r.bytes;
    for (const auto& r : a.reads) bytes += r.bytes;
    switch (a.kind) {
      case ActionKind::kProduce:
      case ActionKind::kCompute: return 20000 + bytes / 20;
      case ActionKind::kCollective: return 15000 + bytes / 10;
      case ActionKind::kDivide: return 3000 + bytes / 200;
      case ActionKind::kCopy:
      case ActionKind::kCopyBack:
      case ActionKind::kMemset: return 2000 + bytes / 200;
      default: return 0;
    }
  }

  StepOutcome run(const SimOptions& opt) {
    prepare_step(opt.step);
    Machine m = fresh(opt.step);
    StepOutcome o;
    std::mt19937_64 rng(mix64(opt.seed * 1000003 + opt.step));
    std::vector<SimTransition>* order = opt.record_order ? &o.order : nullptr;
    if (opt.policy == SimPolicy::kTimed) return run_timed(opt, rng);
    std::vector<uint32_t> prio(s.streams.size());
    for (uint32_t i = 0; i < prio.size(); ++i) prio[i] = i;
    std::shuffle(prio.begin(), prio.end(), rng);
    std::vector<SimTransition> cand;
    for (;;) {
      advance_eager(m, order, opt.step);
      enabled(m, cand);
      if (cand.empty()) break;
      size_t pick = 0;
      if (opt.policy == SimPolicy::kProgramOrder) {
        // The host issued everything up to a sync; run the oldest issued op to completion.
        pick = 0;
        for (size_t i = 0; i < cand.size(); ++i)
          if (cand[i].action < cand[pick].action) pick = i;
      } else if (opt.policy == SimPolicy::kRandom) {
        pick = size_t(rng() % cand.size());
      } else {
        std::uniform_real_distribution<double> u(0, 1);
        if (u(rng) < 0.85) {
          for (size_t i = 0; i < cand.size(); ++i)
            if (prio[cand[i].stream] < prio[cand[pick].stream]) pick = i;
        } else {
          pick = size_t(rng() % cand.size());
        }
      }
      auto t = cand[pick];
      if (order) order->push_back(t);
      take(m, t, opt.step);
      if (opt.policy == SimPolicy::kProgramOrder && !t.finish) {
        if (order) order->push_back(SimTransition{t.stream, t.action, true});
        finish(m, t.stream);
      }
    }
    if (!done(m))
      o.deadlock = true;
    else
      check(m, opt.step, o);
    return o;
  }

  StepOutcome run_timed(const SimOptions& opt, std::mt19937_64& rng) {
    Machine m = fresh(opt.step);
    StepOutcome o;
    const uint32_t ns = uint32_t(s.streams.size());
    std::vector<std::vector<uint64_t>> issue_t(ns), finish_t(ns);
    for (uint32_t st = 0; st < ns; ++st) {
      issue_t[st].assign(items[st].size(), 0);
      finish_t[st].assign(items[st].size(), 0);
    }
    std::vector<uint64_t> start_t(ns, 0), end_t(ns, 0);
    std::uniform_real_distribution<double> u(-1, 1);
    uint64_t host_t = 0;
    struct Interval {
      uint64_t a, b;
      uint32_t stream;
      bool collective;
    };
    std::vector<Interval> ivs;
    auto dep_time = [&](const Dep& d) { return finish_t[d.first][d.second]; };
    for (;;) {
      // Earliest possible next event: a host step, an op start, or an op finish.
      uint64_t best = std::numeric_limits<uint64_t>::max();
      int kind = -1;  // 0 host, 1 start, 2 finish
      uint32_t bst = 0;
      if (m.host_pc < host.size() && gate_open(m, host[m.host_pc])) {
        uint64_t t = host_t;
        for (const auto& d : host[m.host_pc].gate) t = std::max(t, dep_time(d));
        best = t;
        kind = 0;
      }
      for (uint32_t st = 0; st < ns; ++st) {
        if (m.started[st]) {
          if (end_t[st] < best || (end_t[st] == best && kind != 2)) {
            best = end_t[st];
            kind = 2;
            bst = st;
          }
        } else if (can_start(m, st)) {
          uint32_t k = m.completed[st];
          uint64_t t = issue_t[st][k];
          if (k) t = std::max(t, finish_t[st][k - 1]);
          for (const auto& d : items[st][k].deps) t = std::max(t, dep_time(d));
          if (t < best) {
            best = t;
            kind = 1;
            bst = st;
          }
        }
      }
      if (kind < 0) break;
      if (kind == 0) {
        const HostStep& h = host[m.host_pc];
        host_t = best;
        host_effect(h, m.mem, opt.step);
        if (h.issue_stream >= 0) {
          issue_t[size_t(h.issue_stream)][issued(m, uint32_t(h.issue_stream))] = host_t;
          host_t += opt.launch_ns;
        }
        ++m.host_pc;
      } else if (kind == 1) {
        const Item& it = head(m, bst);
        const Action& a = s.actions[it.action];
        uint64_t c = cost(a);
        if (a.kind != ActionKind::kSpin && c) c = uint64_t(double(c) * (1.0 + opt.jitter * u(rng)));
        start_t[bst] = best;
        end_t[bst] = best + c;
        if (it.memory) m.pending[bst] = compute(it, m.mem, opt.step, s.rank, &contrib);
        m.started[bst] = 1;
        if (opt.record_order) o.order.push_back(SimTransition{bst, it.action, false});
      } else {
        const Item& it = head(m, bst);
        const Action& a = s.actions[it.action];
        if (it.memory) apply(it, m.pending[bst], m.mem);
        finish_t[bst][m.completed[bst]] = end_t[bst];
        if (is_device_op(a.kind) && a.kind != ActionKind::kSpin && end_t[bst] > start_t[bst])
          ivs.push_back(Interval{start_t[bst], end_t[bst], bst, a.kind == ActionKind::kCollective});
        m.started[bst] = 0;
        m.pending[bst].clear();
        ++m.completed[bst];
        if (opt.record_order) o.order.push_back(SimTransition{bst, it.action, true});
        o.step_ns = std::max(o.step_ns, end_t[bst]);
      }
    }
    o.step_ns = std::max(o.step_ns, host_t);
    if (!done(m)) {
      o.deadlock = true;
      return o;
    }
    check(m, opt.step, o);
    // Overlap: collective time during which some other stream ran a non-collective op.
    auto measure = [](std::vector<std::pair<uint64_t, uint64_t>> v) {
      std::sort(v.begin(), v.end());
      uint64_t total = 0, cur_a = 0, cur_b = 0;
      bool open = false;
      for (auto [a, b] : v) {
        if (!open || a > cur_b) {
          if (open) total += cur_b - cur_a;
          cur_a = a;
          cur_b = b;
          open = true;
        } else {
          cur_b = std::max(cur_b, b);
        }
      }
      if (open) total += cur_b - cur_a;
      return total;
    };
    std::vector<std::pair<uint64_t, uint64_t>> coll, both;
    for (const auto& c : ivs) {
      if (!c.collective) continue;
      coll.push_back({c.a, c.b});
      for (const auto& d : ivs) {
        if (d.collective || d.stream == c.stream) continue;
        uint64_t a = std::max(c.a, d.a), b = std::min(c.b, d.b);
        if (a < b) both.push_back({a, b});
      }
    }
    o.collective_ns = measure(coll);
    o.overlapped_ns = measure(both);
    return o;
  }
};

StreamSimulator::StreamSimulator(const Schedule& s, uint64_t max_cells) : impl_(std::make_unique<Impl>()) {
  impl_->s = s;
  impl_->build(max_cells);
}

StreamSimulator::~StreamSimulator() = default;

uint64_t StreamSimulator::cells() const { return impl_->ncells; }

uint64_t StreamSimulator::cells_needed(const Schedule& s) {
  const uint64_t cb = s.cell_bytes();
  uint64_t n = 0;
  for (const auto& b : s.buffers) n += b.bytes / cb;
  return n;
}

StepOutcome StreamSimulator::run(const SimOptions& opts) { return impl_->run(opts); }

SearchResult StreamSimulator::search(uint32_t step, const SearchLimits& limits) {
  impl_->prepare_step(step);
  SearchResult res;
  Machine m = impl_->fresh(step);
  std::unordered_set<std::pair<uint64_t, uint64_t>, Impl::KeyHash> seen;
  std::vector<SimTransition> path;
  bool out = false;
  if (impl_->dfs(m, step, limits, res, seen, path, out)) {
    res.verdict = SearchResult::Verdict::kCorruptionFound;
    res.witness = path;
    res.outcome.order = path;
  } else {
    res.verdict = out ? SearchResult::Verdict::kInconclusive : SearchResult::Verdict::kNoCorruption;
  }
  return res;
}

std::string StreamSimulator::describe(const std::vector<SimTransition>& order) const {
  std::string out;
  for (const auto& t : order) {
    const auto& a = impl_->s.actions[t.action];
    if (!touches_memory(a.kind)) continue;
    out += fmt::format("  {:<22} {:<6} {}\n", impl_->s.streams[t.stream].name, t.finish ? "finish" : "start", a.label);
  }
  return out;
}

}  // namespace streamrace::replay
