"""A tensor used on a side stream and freed without record_stream (PyTorch's caching allocator).

racy:   `act` (allocated on the default stream) is read by a kernel on a side stream, then
        freed. The caching allocator hands its block to the next tensor of the default stream
        at once, and the default stream's fill writes it while the side stream may still read
        the old tensor: the classic missing `tensor.record_stream(side)`.
record: act.record_stream(side) before the free: the allocator waits (an event on the side
        stream) before handing the block out again. Clean.
wait:   the default stream waits for the side stream before the free. Clean.

Run: streamrace run -- python samples/torch/record_stream.py racy|record|wait
"""
import sys

import torch


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "racy"
    assert mode in ("racy", "record", "wait"), "usage: record_stream.py racy|record|wait"
    n = 1 << 20
    torch.cuda.init()
    side = torch.cuda.Stream()
    out = torch.empty(1, device="cuda")
    # No temporaries: the only free block of this size is act's once it is deleted.
    act = torch.empty(n, device="cuda")  # on the default stream
    act.fill_(2.0)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # the side stream's read lands late
        torch.sum(act, dim=0, out=out)
    if mode == "record":
        act.record_stream(side)
    elif mode == "wait":
        torch.cuda.current_stream().wait_stream(side)
    del act  # the block goes back to the default stream's pool
    reused = torch.empty(n, device="cuda")  # same size, same stream: the same block
    reused.fill_(7.0)
    torch.cuda.synchronize()
    print(f"record_stream.py {mode} done, out={out.item()}")


if __name__ == "__main__":
    main()
