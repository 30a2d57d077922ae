"""Pinned host tensors reused while a non_blocking copy still uses them (--host-accesses).

The classic data-loader shape: a batch in a pinned buffer, `.to(device, non_blocking=True)`,
then the buffer is refilled with the next batch before anything waited for the copy. The
copy runs later in stream order (here behind torch.cuda._sleep), so the device gets the next
batch's data. The twin bug on the way back: `out.copy_(dev, non_blocking=True)` into a pinned
tensor and reading `out` at once.

racy:  refill the pinned source / read the pinned destination right after the copy call.
clean: torch.cuda.current_stream().synchronize() before each.

Run: streamrace run --host-accesses -- python samples/torch/pin_memory_reuse.py racy|clean
The printed values differ between the modes, never between a traced and an untraced run.
"""
import sys

import torch


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "racy"
    assert mode in ("racy", "clean"), "usage: pin_memory_reuse.py racy|clean"
    n = 1 << 20
    batch = torch.empty(n, dtype=torch.float32).pin_memory()
    out = torch.empty(n, dtype=torch.float32, pin_memory=True)
    result = torch.full((n,), 3.0, device="cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream()

    # 1. H2D: the pinned batch is refilled before the copy ran.
    batch.fill_(1.0)
    torch.cuda._sleep(200_000_000)  # ~100 ms: the copy below runs after it (and after the refill)
    dev = batch.to("cuda", non_blocking=True)
    if mode == "clean":
        stream.synchronize()
    batch.fill_(2.0)  # racy: the next batch lands in the buffer the copy still reads
    torch.cuda.synchronize()
    print(f"h2d: the device got {dev[0].item():.0f} (1 = the batch at the copy's call)")

    # 2. D2H: the pinned destination is read before the copy is known complete.
    out.zero_()
    torch.cuda._sleep(200_000_000)
    out.copy_(result, non_blocking=True)
    if mode == "clean":
        stream.synchronize()
    seen = out[0].item()  # racy: before the copy ran
    torch.cuda.synchronize()
    print(f"d2h: the host read {seen:.0f} (3 = the copied data)")
    print(f"pin_memory_reuse.py {mode} done")


if __name__ == "__main__":
    main()
