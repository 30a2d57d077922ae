"""A launch-bound loop of tiny PyTorch ops: what the tracer adds per CUDA call.

    python3 samples/realistic/launch_loop.py                 # 20000 x.add_(1), 5 repeats
    python3 samples/realistic/launch_loop.py --ops 50000 --repeats 7

Each op is one in-place add on a 16-element tensor: one kernel launch, microseconds of host
time, nothing for the GPU to do. Per repeat: synchronise, time --ops ops, synchronise.
Prints `us_per_op X` (median over repeats) after one untimed warm-up repeat.
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
    a = p.parse_args(argv)
    if a.ops < 1 or a.repeats < 1:
        p.error("--ops and --repeats must be >= 1")
    import torch

    device = rc.pick_device(a.device)
    x = torch.zeros(16, device=device)
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


if __name__ == "__main__":
    sys.exit(main())
