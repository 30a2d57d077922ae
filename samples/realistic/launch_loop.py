"""A launch-bound loop of tiny PyTorch ops: what the tracer adds per CUDA call.

    python3 samples/realistic/launch_loop.py                 # 20000 x.add_(1), 5 repeats
    python3 samples/realistic/launch_loop.py --ops 50000 --repeats 7

Each op is one in-place add on a 16-element tensor: one kernel launch, microseconds of host
time, nothing for the GPU to do. Per repeat: synchronise, time --ops ops, synchronise.
Prints `us_per_op X` (median over repeats) after one untimed warm-up repeat.

    python3 samples/realistic/launch_loop.py --ab 40         # under `streamrace run` or bench/cupti_floor

--ab PAIRS measures inside one process what the tracer adds per op: blocks of --ops ops with
the tracer's CUDA callbacks on and off (`streamrace_bench_pause`, exported by libstreamrace.so
and by bench/cupti_floor's empty subscriber), alternating, the order swapped every pair, so the
machine's drift between processes (±15 %) cancels out. Prints `ab_on_us`, `ab_off_us` (medians
per op), `ab_added_us` (the median of the pairs' differences) and how many pairs the off block won.
"""
import argparse
import statistics
import sys
import time

import realistic_common as rc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=20000, help="ops per repeat (default 20000)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats (default 5)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--ab", type=int, default=0, metavar="PAIRS",
                   help="pairs of blocks with the tracer's callbacks on and off, in one process (see above)")
    a = p.parse_args(argv)
    if a.ops < 1 or a.repeats < 1:
        p.error("--ops and --repeats must be >= 1")
    import torch

    device = rc.pick_device(a.device)
    x = torch.zeros(16, device=device)
    if a.ab > 0:
        return ab_pairs(torch, x, device, a.ops, a.ab)
    per_op = []
    for r in range(a.repeats + 1):
        rc.sync(device)
        t0 = time.perf_counter()
        for _ in range(a.ops):
            x.add_(1)
        rc.sync(device)
        if r > 0:  # the first repeat warms up the allocator, the kernel cache and the tracer
            per_op.append((time.perf_counter() - t0) * 1e6 / a.ops)
    expect = float(a.ops * (a.repeats + 1))
    got = x[0].item()
    if expect < 2**24 and got != expect:  # fp32 counts exactly up to 2^24
        print(f"launch_loop: wrong result {got} != {expect}", file=sys.stderr)
        return 1
    print(f"launch_loop: torch {torch.__version__} device {device} ops {a.ops} repeats {a.repeats} "
          f"min_us {min(per_op):.3f} max_us {max(per_op):.3f}", flush=True)
    print(f"us_per_op {statistics.median(per_op):.3f}", flush=True)
    return 0


find_pause = rc.find_pause


def ab_pairs(torch, x, device, ops, pairs) -> int:
    pause = find_pause()
    if pause is None:
        print("launch_loop: --ab needs streamrace_bench_pause (run under `streamrace run` or bench/cupti_floor)",
              file=sys.stderr)
        return 2

    def block(paused):
        if pause(1 if paused else 0) != 0:
            raise RuntimeError("streamrace_bench_pause failed: the tracer is not tracing CUDA calls here")
        rc.sync(device)
        t0 = time.perf_counter()
        for _ in range(ops):
            x.add_(1)
        rc.sync(device)
        return (time.perf_counter() - t0) * 1e6 / ops

    block(False)
    block(True)  # warm-up of both states
    on, off = rc.alternate(block, pairs)
    pause(0)
    rc.report_pairs(f"launch_loop: torch {torch.__version__} device {device} ops {ops} pairs {pairs} ", on, off, "us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
