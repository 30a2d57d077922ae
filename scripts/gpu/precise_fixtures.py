#!/usr/bin/env python3
"""Turns a precise batch's traces (scripts/gpu/precise_batch.sh) into CI fixtures under
tests/data/precise/<case>/: the trace files and a case.json, printing the findings the given
streamrace binary reports for them in both tiers. Then write each case's full expected
reports with `tests/update_expected.sh --update '*precise_*'` and review them against the
sample's intent (tests/samples/precise_fixture_test.cpp also checks the intent
independently of them).

  precise_fixtures.py STREAMRACE TRACES_DIR [TRACES_DIR...] --out tests/data/precise
"""
import argparse
import json
import os
import shutil
import subprocess

PROGRAMS = {
    "views": "samples/precise/views.cu",
    "torch": "samples/precise/torch_views.py",
    "torch_nccl": "python3 -m torch.distributed.run --nproc_per_node=2 samples/torch/nccl_allreduce.py",
}


def access(a):
    base = int(a["allocation"]["base"], 16)
    return {"op": a["op"], "direction": a["direction"], "exact": a["exact"],
            "offset": int(a["addr"], 16) - base, "bytes": a["bytes"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("streamrace")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip", action="append", default=["smoke_load", "smoke_init"])
    a = ap.parse_args()
    for root in a.dirs:
        for case in sorted(os.listdir(root)):
            src = os.path.join(root, case)
            if case in a.skip or not os.path.isdir(src):
                continue
            traces = sorted(f for f in os.listdir(src) if f.endswith(".srace"))
            if not traces:
                continue
            dst = os.path.join(a.out, case)
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            for t in traces:
                shutil.copy(os.path.join(src, t), dst)
            rep = json.loads(subprocess.run([a.streamrace, "analyze", "--format", "json", dst],
                                            capture_output=True, text=True).stdout)
            base = json.loads(subprocess.run([a.streamrace, "analyze", "--ignore-precise", "--format", "json", dst],
                                             capture_output=True, text=True).stdout)
            findings = []
            for f in rep["findings"]:
                e, l = f["accesses"][0], f["accesses"][1]
                alloc = int(e["allocation"]["base"], 16)
                findings.append({"kind": f["kind"], "confidence": f["confidence"], "mode": f["mode"],
                                 "occurrences": f["occurrences"], "earlier": access(e), "later": access(l),
                                 "overlap": {"offset": int(f["overlap"]["addr"], 16) - alloc,
                                             "bytes": f["overlap"]["bytes"]}})
            with open(os.path.join(dst, "case.json"), "w") as fh:
                json.dump({"program": case, "command": "scripts/gpu/precise_batch.sh",
                           "recorded": os.environ.get("RECORDED", "")}, fh, indent=2)
                fh.write("\n")
            # Empty until tests/update_expected.sh --update writes the two full reports.
            for name in ("expected.json", "expected.ignore-precise.json"):
                open(os.path.join(dst, name), "w").close()
            print("  as the default tier:", [(f["kind"], f["confidence"]) for f in base["findings"]])
            print(case, len(traces), [(f["kind"], f["confidence"]) for f in findings])


if __name__ == "__main__":
    main()
