#!/usr/bin/env python3
"""Turns a precise batch's traces (scripts/gpu/precise_batch.sh) into CI fixtures under
tests/data/precise/<case>/: the trace files and an expected.json written from the analysis of
those traces by the given streamrace binary. Review expected.json against the sample's
intent before committing it (tests/gpu_fixtures/precise_fixture_test.cpp also checks the
intent independently of it).

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
            exp = {"traces": len(traces), "trace_mode": rep["traces"][0]["mode"],
                   "ranks": sorted(t["rank"] for t in rep["traces"]),
                   "findings": findings,
                   "as_default_tier": [{"kind": f["kind"], "confidence": f["confidence"]} for f in base["findings"]]}
            with open(os.path.join(dst, "expected.json"), "w") as fh:
                json.dump(exp, fh, indent=1)
                fh.write("\n")
            print(case, len(traces), [(f["kind"], f["confidence"]) for f in findings])


if __name__ == "__main__":
    main()
