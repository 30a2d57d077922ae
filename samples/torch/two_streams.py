"""Two streams in PyTorch: a side stream writes a tensor, the default stream copies it.

racy: nothing orders the default stream after the side stream (PyTorch's side streams are
      non-blocking, so the legacy default stream does not wait for them).
clean: torch.cuda.current_stream().wait_stream(side) before the copy.

Both copies are tensor.copy_ of contiguous tensors, i.e. cudaMemcpyAsync: exact accesses.
Run: streamrace run -- python samples/torch/two_streams.py racy|clean
"""
import sys

import torch


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "racy"
    assert mode in ("racy", "clean"), "usage: two_streams.py racy|clean"
    n = 1 << 20
    src = torch.ones(n, device="cuda")
    x = torch.empty(n, device="cuda")
    y = torch.empty(n, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # widen the window: the write lands late
        x.copy_(src)
    if mode == "clean":
        torch.cuda.current_stream().wait_stream(side)
    y.copy_(x)
    torch.cuda.synchronize()
    print(f"two_streams.py {mode} done, y[0]={y[0].item()}")


if __name__ == "__main__":
    main()
