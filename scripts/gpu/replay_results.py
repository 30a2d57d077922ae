#!/usr/bin/env python3
"""Results of the replay GPU batch (scripts/gpu/replay_batch.sh calls this as its last step).

Reads what the batch wrote under WORK ($OUT/replay: stage<S>-<variant>-{delay,cost,traced}/rank<R>.json
and .log, stage<S>-<variant>-traced/trace/, cpu_stage<S>.json, ir/, gpus.txt) and writes OUT/<name>.json and OUT/<name>.md:
per stage and variant the GPU corruption under delay injection (corrupt steps, corrupted elements
per step out of the elements checked, where), steps run, step time and collective/compute overlap
without delay, and the CPU verdicts (analyzer on the emitted traces; simulator when the batch ran
it) next to them. Stages or variants whose runs are missing are reported as not run / no result,
never as clean. Can be re-run on a copied-back batch directory.

usage: replay_results.py WORK OUT STAGES VARIANTS DELAY_US STEPS COST_STEPS
                         [--name replay_results] [--machine KEY=VALUE ...] [--note TEXT ...]
Exit 0 when every stage asked for ran and came out as expected (`none` corrupts, every fix is
clean, at least STEPS steps), 1 otherwise.
"""
import argparse
import json
import os
import sys


def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except Exception as e:  # missing or unreadable: recorded, never counted as clean
        return {"error": f"{p}: {e}"}


def nccl_str(code):
    if not code:
        return "?"
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}" if code >= 10000 else f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def checked_elements(work, stage, variant, rank):
    """Elements checked per step on this rank: the sum of the IR's expectation ranges."""
    ir = load(os.path.join(work, "ir", f"stage{stage}-{variant}-rank{rank}.json"))
    if "error" in ir:
        return None
    eb = ir.get("elem_bytes", 4) or 4
    return sum(e["range"][2] // eb for e in ir.get("expectations", []))


def log_tail(path, n=5):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
        return lines[-n:]
    except OSError:
        return None


def run_dir(work, stage, variant, tag):
    """Per-rank results of one run, with each rank's status ('clean', 'corrupted', 'failed')."""
    d = os.path.join(work, f"stage{stage}-{variant}-{tag}")
    if not os.path.isdir(d):
        return "not run", []
    ranks = []
    r = 0
    while os.path.exists(os.path.join(d, f"rank{r}.json")) or os.path.exists(os.path.join(d, f"rank{r}.log")):
        j = load(os.path.join(d, f"rank{r}.json"))
        j["_rank"] = r
        tail = log_tail(os.path.join(d, f"rank{r}.log"))
        j["_log_tail"] = tail or []
        if "error" in j:
            j["_status"] = "failed (no result file)"
        elif j.get("corrupt_steps", 0) > 0:
            j["_status"] = "corrupted"  # the executor exits 1 on corruption: the batch's "failed or corrupted"
        else:
            j["_status"] = "clean"
        ranks.append(j)
        r += 1
    if not ranks:
        return "started, no rank output", []
    if all("error" in j for j in ranks):
        return "started, no result (killed or failed; see logs)", ranks
    return "ran", ranks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("out")
    ap.add_argument("stages")
    ap.add_argument("variants")
    ap.add_argument("delay", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("cost_steps", type=int)
    ap.add_argument("--name", default="replay_results")
    ap.add_argument("--machine", action="append", default=[], help="KEY=VALUE recorded under machine")
    ap.add_argument("--note", action="append", default=[], help="a line for the notes section")
    a = ap.parse_args()
    stages, variants = a.stages.split(), a.variants.split()

    rows, ok, by_stage = [], True, {}
    nccl_codes, devices = set(), set()
    for st in stages:
        cpu = load(os.path.join(a.work, f"cpu_stage{st}.json"))
        cpu_by = {v.get("variant"): v for v in cpu.get("variants", [])} if "variants" in cpu else {}
        stage_ok = True
        stage_ran = False
        for v in variants:
            row = {"stage": int(st), "variant": v, "delay_us": a.delay}
            for tag in ("delay", "cost"):
                state, ranks = run_dir(a.work, st, v, tag)
                row[tag + "_state"] = state
                row[tag] = ranks
            d = [r for r in row["delay"] if "error" not in r]
            c = [r for r in row["cost"] if "error" not in r]
            for r in d + c:
                nccl_codes.add(r.get("nccl_version", 0))
                devices.add(r.get("device", "?"))
            stage_ran |= bool(d or c)
            row["ranks"] = len(d)
            row["corrupt_steps"] = sum(r.get("corrupt_steps", 0) for r in d)
            row["corrupt_elements"] = sum(r.get("corrupt_elements", 0) for r in d)
            row["steps"] = max([r.get("steps", 0) for r in d] or [0])
            row["step_ms"] = max([r.get("step_ms_mean", 0) for r in c] or [0])
            row["step_ms_p50"] = max([r.get("step_ms_p50", 0) for r in c] or [0])
            row["step_ms_p90"] = max([r.get("step_ms_p90", 0) for r in c] or [0])
            row["collective_ms"] = max([r.get("collective_ms_mean", 0) for r in c] or [0])
            row["overlap_pct"] = min([r.get("overlap_pct_mean", 0) for r in c] or [0])
            row["cost_steps"] = max([r.get("steps", 0) for r in c] or [0])
            row["cost_corrupt_steps"] = sum(r.get("corrupt_steps", 0) for r in c)
            # Per rank: corrupted elements per step out of the elements checked, and where.
            per_rank = []
            for r in d:
                n = checked_elements(a.work, st, v, r["_rank"])
                steps_r = max(r.get("steps", 0), 1)
                per_step = r.get("corrupt_elements", 0) / steps_r
                where = {}
                for fc in r.get("first_corruptions", []):
                    k = (fc.get("where"), fc.get("expectation"), fc.get("step"))
                    e = fc.get("element", 0)
                    lo, hi = where.get(k, (e, e))
                    where[k] = (min(lo, e), max(hi, e))
                per_rank.append({
                    "rank": r["_rank"], "status": r["_status"], "steps": r.get("steps", 0),
                    "corrupt_steps": r.get("corrupt_steps", 0), "corrupt_elements": r.get("corrupt_elements", 0),
                    "corrupt_elements_per_step": per_step, "checked_elements_per_step": n,
                    "corrupt_fraction": (per_step / n) if n else None,
                    "first_corruptions_at": [
                        {"buffer": k[0], "expectation": k[1], "step": k[2], "elements": [lo, hi]}
                        for k, (lo, hi) in where.items()],
                    "first_corruptions": r.get("first_corruptions", []),
                    "log_tail": r["_log_tail"],
                })
            row["per_rank"] = per_rank
            # The short run under `streamrace run` (TRACE=1): corruption under the tracer, the
            # tracer's own verdict (the last 'streamrace:' line of each rank log), the traces.
            t_state, t_ranks = run_dir(a.work, st, v, "traced")
            tdir = os.path.join(a.work, f"stage{st}-{v}-traced", "trace")
            tfiles = sorted(f for f in os.listdir(tdir) if f.endswith(".srace")) if os.path.isdir(tdir) else []
            row["traced"] = {
                "state": t_state,
                "trace_files": {f: os.path.getsize(os.path.join(tdir, f)) for f in tfiles},
                "ranks": [{"rank": r["_rank"], "status": r["_status"], "steps": r.get("steps", 0),
                           "corrupt_steps": r.get("corrupt_steps", 0),
                           "verdict": next((l for l in reversed(r["_log_tail"]) if l.startswith("streamrace:")), None)}
                          for r in t_ranks],
            }
            a_ = cpu_by.get(v, {}).get("analyzer", {})
            row["analyzer_certain"], row["analyzer_possible"] = a_.get("certain"), a_.get("possible")
            row["analyzer_fingerprints"] = a_.get("fingerprints")
            row["analyzer_first_finding"] = a_.get("first_finding")
            s = cpu_by.get(v, {}).get("simulator", {})
            row["cpu_sim_corrupt_steps"] = s.get("corrupt_steps")
            row["cpu_sim_exhaustive"] = s.get("exhaustive")
            failed = len(d) == 0 or any("error" in r for r in row["delay"] + row["cost"])
            expect_corrupt = v == "none"
            good = (not failed) and ((row["corrupt_steps"] > 0) == expect_corrupt) and row["steps"] >= a.steps
            row["as_expected"] = good
            stage_ok &= good
            ok &= good
            for tag in ("delay", "cost"):  # keep the raw per-rank results, minus the helper keys
                row[tag] = [{k: x for k, x in r.items() if not k.startswith("_")} for r in row[tag]]
            rows.append(row)
        by_stage[st] = {"ran": stage_ran, "as_expected": stage_ok if stage_ran else None}

    gpus = None
    try:
        with open(os.path.join(a.work, "gpus.txt")) as f:
            gpus = [l.strip() for l in f if l.strip()]
    except OSError:
        pass
    machine = {"gpus": gpus, "devices": sorted(devices),
               "nccl_runtime": [f"{nccl_str(c)} (ncclGetVersion {c})" for c in sorted(nccl_codes)]}
    for kv in a.machine:
        k, _, val = kv.partition("=")
        machine[k] = val
    res = {"schema": "streamrace-replay-batch", "version": 2, "delay_us": a.delay, "steps": a.steps,
           "cost_steps": a.cost_steps, "machine": machine, "stages": by_stage, "notes": a.note,
           "rows": rows, "as_expected": ok}
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(res, f, indent=2)

    base = {}
    for r in rows:
        if r["variant"] == "none":
            base[r["stage"]] = (r["step_ms"], r["step_ms_p50"])
    lines = ["| stage | variant | GPU corrupt steps (delay %sus) | corrupt elements | analyzer certain/possible | CPU sim corrupt steps | step ms (no delay) | vs none | step ms p50 | vs none (p50) | collective ms | overlap %% | as expected |" % a.delay,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["ranks"] == 0:
            lines.append(f"| {r['stage']} | {r['variant']} | {r['delay_state']} | - | "
                         f"{r['analyzer_certain']}/{r['analyzer_possible']} | - | - | - | - | - | - | - | not run |")
            continue
        b, b50 = base.get(r["stage"], (0, 0))
        rel = f"{(r['step_ms'] / b - 1) * 100:+.1f}%" if b else "n/a"
        rel50 = f"{(r['step_ms_p50'] / b50 - 1) * 100:+.1f}%" if b50 else "n/a"
        lines.append(f"| {r['stage']} | {r['variant']} | {r['corrupt_steps']}/{r['steps'] * max(r['ranks'], 1)} | {r['corrupt_elements']} | "
                     f"{r['analyzer_certain']}/{r['analyzer_possible']} | {'-' if r['cpu_sim_corrupt_steps'] is None else r['cpu_sim_corrupt_steps']} | {r['step_ms']:.3f} | {rel} | {r['step_ms_p50']:.3f} | {rel50} | "
                     f"{r['collective_ms']:.3f} | {r['overlap_pct']:.1f} | {'yes' if r['as_expected'] else 'NO'} |")
    table = list(lines)

    md = ["# Replay GPU batch results", ""]
    md += ["## Machine", ""]
    for k, val in machine.items():
        md.append(f"- {k}: {', '.join(val) if isinstance(val, list) else val}")
    md += ["", f"Delay runs: {a.steps} steps per rank with a {a.delay} us spin on the reduction stream before "
           f"every flush. Cost runs: {a.cost_steps} steps without delay. Step time is the slowest rank's "
           "mean (p50 and p90 below), overlap the least-overlapping rank's mean share of collective time "
           "during which another stream ran a non-collective op.", "", "## Summary", ""] + table
    md += ["", "## Per variant and rank", "",
           "| stage | variant | rank | status | corrupt steps (delay) | corrupted elements per step / checked | first corruptions at | "
           "cost runs: corrupt steps | step ms mean / p50 / p90 (no delay) | collective ms | overlap % |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cost_by = {c.get("rank"): c for c in r["cost"] if "error" not in c}
        if not r["per_rank"]:
            md.append(f"| {r['stage']} | {r['variant']} | - | delay: {r['delay_state']}; cost: {r['cost_state']} | - | - | - | - | - | - | - |")
            continue
        for p in r["per_rank"]:
            c = cost_by.get(p["rank"], {})
            frac = f" ({p['corrupt_fraction'] * 100:.2f}%)" if p["corrupt_fraction"] is not None else ""
            n = p["checked_elements_per_step"]
            at = "; ".join(f"{w['buffer']}: {w['expectation']}, elements {w['elements'][0]}-{w['elements'][1]}, step {w['step']}"
                           for w in p["first_corruptions_at"]) or "-"
            md.append(f"| {r['stage']} | {r['variant']} | {p['rank']} | {p['status']} | {p['corrupt_steps']}/{p['steps']} | "
                      f"{p['corrupt_elements_per_step']:.0f} / {n if n is not None else '?'}{frac} | {at} | "
                      f"{c.get('corrupt_steps', '-')}/{c.get('steps', '-')} | "
                      f"{c.get('step_ms_mean', 0):.3f} / {c.get('step_ms_p50', 0):.3f} / {c.get('step_ms_p90', 0):.3f} | "
                      f"{c.get('collective_ms_mean', 0):.3f} | {c.get('overlap_pct_mean', 0):.1f} |")
    logs = [(r, p) for r in rows for p in r["per_rank"] if p["log_tail"]]
    md += ["", "## Rank logs", ""]
    if not logs:
        md.append("Every rank log of the runs that produced a result is empty (no error, no warning).")
    else:
        for r, p in logs:
            md.append(f"- stage {r['stage']} {r['variant']} rank {p['rank']}: " + " / ".join(p["log_tail"]))
    traced = [r for r in rows if r["traced"]["state"] != "not run"]
    if traced:
        md += ["", "## Traced runs (`streamrace run`, TRACE=1)", "",
               "| stage | variant | rank | status | corrupt steps | tracer's verdict |", "|---|---|---|---|---|---|"]
        for r in traced:
            for t in r["traced"]["ranks"]:
                md.append(f"| {r['stage']} | {r['variant']} | {t['rank']} | {t['status']} | {t['corrupt_steps']}/{t['steps']} | "
                          f"{t['verdict'] or '-'} |")
        md.append("")
        for r in traced:
            files = r["traced"]["trace_files"]
            md.append(f"- stage {r['stage']} {r['variant']}: {len(files)} trace(s), "
                      f"{sum(files.values()) / 1024:.0f} KiB ({', '.join(files) or 'none'}); {r['traced']['state']}")
    md += ["", "## CPU verdicts of the same schedules", ""]
    for r in rows:
        if r["analyzer_certain"] is None:
            continue
        sim = r["cpu_sim_exhaustive"] or ("not run by the batch (no --simulate)" if r["cpu_sim_corrupt_steps"] is None else "")
        md.append(f"- stage {r['stage']} {r['variant']}: analyzer {r['analyzer_certain']} certain, {r['analyzer_possible']} possible"
                  + (f" ({r['analyzer_first_finding']}; fingerprints {', '.join(r['analyzer_fingerprints'] or [])})" if r["analyzer_first_finding"] else "")
                  + f"; simulator: {sim}")
    md += ["", "## Stages", ""]
    for st, s in by_stage.items():
        md.append(f"- stage {st}: " + ("not run on the GPU" if not s["ran"] else
                                       ("as expected" if s["as_expected"] else "NOT as expected")))
    if a.note:
        md += ["", "## Notes", ""] + [f"- {n}" for n in a.note]
    with open(os.path.join(a.out, a.name + ".md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(table))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
