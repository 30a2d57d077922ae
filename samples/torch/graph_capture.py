"""A CUDA graph captured with torch.cuda.graph and replayed on a side stream.

The graph copies `static_in` into `static_out` (a captured cudaMemcpyAsync: a memcpy node).
It is replayed on a side stream (a non-blocking stream, as all of PyTorch's side streams are);
the default stream then clones `static_out`.
racy: nothing orders the default stream after the replay: the clone's copy may read
      `static_out` while the graph's copy node is still writing it.
clean: torch.cuda.current_stream().wait_stream(side) before the clone.

Run: streamrace run -- python samples/torch/graph_capture.py racy|clean
"""
import sys

import torch


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "racy"
    assert mode in ("racy", "clean"), "usage: graph_capture.py racy|clean"
    n = 1 << 20
    static_in = torch.ones(n, device="cuda")
    static_out = torch.empty(n, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out.copy_(static_in)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # widen the window: the replay's write lands late
        g.replay()
    if mode == "clean":
        torch.cuda.current_stream().wait_stream(side)
    result = static_out.clone()
    torch.cuda.synchronize()
    print(f"graph_capture.py {mode} done, result[0]={result[0].item()}")


if __name__ == "__main__":
    main()
