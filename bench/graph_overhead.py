"""Tracer overhead on a graph-heavy step: a captured training step replayed many times (issue #14).

A small MLP training step (forward, backward, SGD step with static tensors: inputs, targets,
gradients and parameters live at fixed addresses) is captured once with torch.cuda.graph and
replayed REPLAYS (>= 100) times per round. Three configurations, interleaved over ROUNDS (>= 3)
rounds, each round one fresh process per configuration:
  untraced     python bench/graph_overhead.py --child
  streamrace   streamrace run -o DIR -- python bench/graph_overhead.py --child
  nostacks     the same with STREAMRACE_STACKS=none
The child prints one JSON line: per-replay time (median of REPLAYS replays, each timed with a
synchronize, and the mean over a back-to-back burst of REPLAYS replays), capture time and
eager step time. The parent prints medians and spread (min-max over rounds) per configuration,
the overhead against untraced, and the machine and versions, and writes them as Markdown to
--out (default bench/results/graph_overhead.md) with the raw JSON lines next to it.

  python bench/graph_overhead.py [--streamrace gpu-carry/bin/streamrace] [--rounds 3] [--replays 200]
         [--deadline-s 300] [--out bench/results/graph_overhead.md]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def child(replays: int) -> None:
    import torch

    torch.manual_seed(0)
    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096), torch.nn.GELU(),
        torch.nn.Linear(4096, 1024),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    static_x = torch.randn(256, 1024, device=dev)
    static_y = torch.randn(256, 1024, device=dev)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    # Warm-up on a side stream (as torch.cuda.graph's documentation asks), then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    eager_ms = (time.perf_counter() - t0) * 1e3 / 5
    g = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()
    with torch.cuda.graph(g):
        static_loss = step()
    torch.cuda.synchronize()
    capture_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        t0 = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize()
    burst_ms = (time.perf_counter() - t0) * 1e3 / replays
    print(json.dumps({"replay_ms_median": statistics.median(times), "replay_ms_burst_mean": burst_ms,
                      "capture_ms": capture_ms, "eager_step_ms": eager_ms, "replays": replays,
                      "loss": float(static_loss.item())}))


def machine() -> str:
    lines = [f"host python {platform.python_version()}, {platform.platform()}"]
    try:
        import torch

        lines.append(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {torch.cuda.get_device_name(0)}")
    except Exception as e:  # noqa: BLE001 - a machine without torch still gets its report
        lines.append(f"torch unavailable: {e}")
    smi = shutil.which("nvidia-smi")
    if smi:
        out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True)
        lines.append("nvidia-smi: " + out.stdout.strip().replace("\n", "; "))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streamrace", default=os.environ.get("STREAMRACE", "gpu-carry/bin/streamrace"))
    ap.add_argument("--deadline-s", type=float, default=300)
    ap.add_argument("--per-run-timeout-s", type=float, default=90)
    ap.add_argument("--out", default="bench/results/graph_overhead.md")
    a = ap.parse_args()
    if a.child:
        child(a.replays)
        return
    if a.replays < 100 or a.rounds < 3:
        sys.exit("graph_overhead.py: the benchmark needs --replays >= 100 and --rounds >= 3")
    t_start = time.time()
    have_sr = os.path.exists(a.streamrace)
    configs = ["untraced", "streamrace", "nostacks"] if have_sr else ["untraced"]
    if not have_sr:
        print(f"graph_overhead.py: no streamrace CLI at {a.streamrace}: only the untraced configuration runs")
    me = os.path.abspath(__file__)
    results = {c: [] for c in configs}
    raw = []
    work = tempfile.mkdtemp(prefix="graph_overhead_")
    for r in range(a.rounds):
        for c in configs:
            if time.time() - t_start > a.deadline_s:
                print(f"graph_overhead.py: deadline reached in round {r + 1}: stopping")
                break
            env = dict(os.environ)
            env.pop("STREAMRACE_STACKS", None)
            cmd = [sys.executable, me, "--child", "--replays", str(a.replays)]
            if c != "untraced":
                tdir = os.path.join(work, f"{c}_{r}")
                cmd = [a.streamrace, "run", "--no-color", "-o", tdir, "--"] + cmd
                if c == "nostacks":
                    env["STREAMRACE_STACKS"] = "none"
            t0 = time.time()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.per_run_timeout_s)
                out, rc = p.stdout + p.stderr, p.returncode
            except subprocess.TimeoutExpired as e:
                out, rc = f"timed out after {a.per_run_timeout_s} s: {e}", 124
            wall = time.time() - t0
            line = next((l for l in out.splitlines() if l.startswith("{\"replay_ms_median\"")), None)
            rec = {"round": r + 1, "config": c, "rc": rc, "wall_s": round(wall, 2)}
            if line:
                rec.update(json.loads(line))
                results[c].append(rec)
            else:
                rec["error"] = out[-600:]
            raw.append(rec)
            print(json.dumps(rec), flush=True)
        else:
            continue
        break
    shutil.rmtree(work, ignore_errors=True)

    def stat(c: str, key: str) -> str:
        v = [x[key] for x in results[c]]
        if not v:
            return "n/a"
        return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"

    base = [x["replay_ms_median"] for x in results.get("untraced", [])]
    lines = ["# Graph-heavy step: a captured MLP training step replayed", "",
             f"`python bench/graph_overhead.py --rounds {a.rounds} --replays {a.replays}`, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "", "```", machine(), "```", "",
             "Per configuration: median over rounds (min-max) of each round's value; one process per round "
             "and configuration, interleaved.", "",
             "| config | rounds | replay ms (median of synchronised replays) | replay ms (burst mean) | capture ms | "
             "eager step ms | replay overhead vs untraced |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in configs:
        v = [x["replay_ms_median"] for x in results[c]]
        over = (f"{(statistics.median(v) / statistics.median(base) - 1) * 100:+.1f} %"
                if v and base and c != "untraced" else "")
        lines.append(f"| {c} | {len(v)} | {stat(c, 'replay_ms_median')} | {stat(c, 'replay_ms_burst_mean')} | "
                     f"{stat(c, 'capture_ms')} | {stat(c, 'eager_step_ms')} | {over} |")
    failed = [x for x in raw if "error" in x]
    if failed:
        lines += ["", f"{len(failed)} runs gave no result: " + "; ".join(f"{x['config']} round {x['round']} rc={x['rc']}"
                                                                         for x in failed)]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as fh:
        fh.write(text)
    with open(os.path.splitext(a.out)[0] + "_runs.jsonl", "w") as fh:
        for x in raw:
            fh.write(json.dumps(x) + "\n")


if __name__ == "__main__":
    main()
