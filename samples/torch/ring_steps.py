"""A long loop of training-like steps, each pushed as the NVTX range "step" (the step marker of
docs/long-runs.md). A side stream copies into `a`, a second stream copies `a` on.

racy: step 47 of 50 forgets the wait between the two streams (the other steps wait).
clean: every step waits.

Run: streamrace run --ring 4 --step-range step -- python samples/torch/ring_steps.py racy|clean
     (the ring keeps steps 46-49: the race is found; --steps 10:20 would not see it)
"""
import sys

import torch


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "racy"
    assert mode in ("racy", "clean"), "usage: ring_steps.py racy|clean"
    racy_step = 47 if mode == "racy" else -1
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    src = torch.ones(1 << 20, device="cuda")
    a = torch.zeros_like(src)
    b = torch.empty_like(src)
    torch.cuda.synchronize()
    for step in range(50):
        torch.cuda.nvtx.range_push("step")
        with torch.cuda.stream(s1):
            a.copy_(src)
        if step != racy_step:
            s2.wait_stream(s1)
        with torch.cuda.stream(s2):
            b.copy_(a)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    print("done", float(b.sum()))


if __name__ == "__main__":
    main()
