"""samples/realistic/realistic_common.py's in-process A/B (gpt2_zero2.py --ab, launch_loop.py
--ab), without a GPU or torch: a fake pause function and steps whose time depends on it.

The alternation swaps the order every pair, the pause is turned off at the end, a block is the
median of its steps, and the printed figures are the medians of the pairs' differences and
ratios; without streamrace_bench_pause the helper says so and returns 2."""
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "samples", "realistic"))
import realistic_common as rc  # noqa: E402


def main() -> int:
    failures = []

    def check(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    # alternate(): on/off, then off/on, ...
    order = []
    on, off = rc.alternate(lambda paused: order.append(paused) or (1.0 if paused else 2.0), 3)
    check("order", order, [False, True, True, False, False, True])
    check("on", on, [2.0, 2.0, 2.0])
    check("off", off, [1.0, 1.0, 1.0])

    # ab_steps(): a fake clock; traced steps take 11 ms, paused ones 10 ms, and the third step of
    # every block an outlier (the block's median ignores it).
    pauses = []
    clock = [0.0]
    steps = [0]
    rc.find_pause = lambda: (lambda p: pauses.append(p) or 0)
    rc.sync = lambda device: None
    rc.time.perf_counter = lambda: clock[0]

    def step():
        steps[0] += 1
        paused = pauses[-1] == 1
        clock[0] += (0.010 if paused else 0.011) + (1.0 if steps[0] % 3 == 0 else 0.0)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc_ab = rc.ab_steps(step, None, 4, 3, "fake")
    check("return", rc_ab, 0)
    check("steps", steps[0], 4 * 2 * 3)
    check("pauses", pauses, [0, 1, 1, 0, 0, 1, 1, 0, 0])
    lines = out.getvalue().splitlines()
    check("lines", lines[1:], ["ab_on_ms 11.000", "ab_off_ms 10.000", "ab_added_ms 1.000", "ab_added_pct 10.00"])
    check("summary", lines[0], "fake: pairs 4 block 3 off_won 4/4 added_min_ms 1.000 added_max_ms 1.000")

    rc.find_pause = lambda: None
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        check("no pause", rc.ab_steps(step, None, 4, 3, "fake"), 2)
    check("no pause message", "needs streamrace_bench_pause" in err.getvalue(), True)

    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
