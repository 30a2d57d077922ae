#!/usr/bin/env bash
# Analyzer throughput: generates a ZeRO-shaped trace (8 streams, events, collectives, 100k
# allocations, copies into buckets; replay/zero_schedule's synthetic_training_config, written
# by streamrace-tracegen), analyses it, and prints as its last line
#   events_per_s=<N> peak_rss_mb=<M>
# events_per_s counts records over the analyzer's CPU time (user+sys, all its threads), so
# other load on the machine does not distort it; wall time is printed too. The analysis runs
# with `-j 1` (one thread) unless JOBS says otherwise (JOBS=2: `--split -j 2`, the trace split over 2 workers).
# Usage: [JOBS=N] bench/analyzer_throughput.sh [EVENTS] [ALLOCATIONS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
events="${1:-10000000}"
allocations="${2:-100000}"
build="${STREAMRACE_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target streamrace streamrace-tracegen -j"$(nproc)" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$build/bin/streamrace-tracegen" --shape training --events "$events" --allocations "$allocations" \
  -o "$work/training.srace" >"$work/gen.txt"
records="$(sed -n 's/^records=//p' "$work/gen.txt")"
python3 - "$build/bin/streamrace" "$work/training.srace" "$records" "${JOBS:-1}" <<'PY'
import resource, subprocess, sys, time, os
exe, trace, records, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t0 = time.monotonic()
p = subprocess.run([exe, "analyze", "-j", jobs] + (["--split"] if jobs != "1" else []) + ["--format", "json=" + os.path.join(os.path.dirname(trace), "findings.json"), trace], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
if p.returncode not in (0, 1):
    sys.exit("analyze failed: " + p.stderr)
size = os.path.getsize(trace)
print(f"trace: {records} records, {size / 2**20:.1f} MiB on disk; verdict: {p.stderr.strip()}")
print(f"analyzer (-j {jobs}): cpu {cpu:.2f} s, wall {wall:.2f} s, {records / wall / 1e6:.2f} M events/s by wall time")
print(f"held: {ru.ru_maxrss * 1024 / records:.1f} bytes of peak RSS per event")
print(f"events_per_s={int(records / cpu)} peak_rss_mb={ru.ru_maxrss // 1024}")
PY
