#!/usr/bin/env bash
# After a tracer_batch.sh run: unpacks results.tar.gz and turns each case's traces into a
# CI case tests/data/gpu/<case>/ (traces + case.json). Prints what the analyzer says for each
# case next to samples/cuda/expected_findings.json, so a human confirms them (entries marked
# "unconfirmed" above all) before writing the cases' full expected reports with
# `tests/update_expected.sh --update '*gpu_*'` and reviewing its diff.
# Usage: scripts/gpu/record_fixtures.sh path/to/results.tar.gz [path/to/streamrace]
# Environment: ONLY (a regular expression: only cases whose name matches it), COMMAND (the batch
# that recorded the traces, for case.json; default scripts/gpu/tracer_batch.sh), RECORDED.
set -eu
TARBALL=$1
SR=${2:-build/bin/streamrace}
WORK=$(mktemp -d)
tar xzf "$TARBALL" -C "$WORK"
python3 - "$WORK/sr_results/traces" "$SR" <<'PY'
import json, os, re, shutil, subprocess, sys
traces_root, sr = sys.argv[1], sys.argv[2]
only = re.compile(os.environ.get("ONLY", ".*"))
expected = json.load(open("samples/cuda/expected_findings.json"))
for case, exp in sorted(expected.items()):
    if case.startswith("_") or not only.search(case):
        continue
    src = os.path.join(traces_root, case)
    files = sorted(f for f in os.listdir(src) if f.endswith(".srace")) if os.path.isdir(src) else []
    if not files:
        print(f"{case}: no traces recorded")
        continue
    big = [f for f in files if os.path.getsize(os.path.join(src, f)) > 1 << 20]
    if big:
        print(f"{case}: trace over 1 MiB, not copied: {big}")
        continue
    dst = os.path.join("tests/data/gpu", case)
    os.makedirs(dst, exist_ok=True)
    for f in files:
        shutil.copy(os.path.join(src, f), dst)
    meta = {"program": case, "command": os.environ.get("COMMAND", "scripts/gpu/tracer_batch.sh"), "recorded": os.environ.get("RECORDED", "")}
    with open(os.path.join(dst, "case.json"), "w") as fh:
        json.dump(meta, fh, indent=2)
        fh.write("\n")
    out = subprocess.run([sr, "analyze", "--format", "json", dst], capture_output=True, text=True)
    got = []
    try:
        for f in json.loads(out.stdout).get("findings", []):
            short = {"read-after-write": "RAW", "write-after-read": "WAR", "write-after-write": "WAW",
                     "host-write-during-copy": "HWC", "host-read-during-copy": "HRC"}
            earlier, later = f["accesses"]  # the JSON report lists [earlier, later]
            got.append((short.get(f["kind"], f["kind"]), f["confidence"], earlier["op"], later["op"]))
    except Exception as e:  # noqa: BLE001 - show whatever the CLI said
        got = [f"unreadable analyzer output: {e}: {out.stderr.strip()}"]
    flag = " (UNCONFIRMED)" if exp.get("unconfirmed") else ""
    print(f"{case}{flag}:\n  expected {[(f['kind'], f['confidence'], f['earlier_op'], f['later_op']) for f in exp['findings']]}\n  analyzer {got}")
PY
rm -rf "$WORK"
