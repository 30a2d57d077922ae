"""torch.cuda.make_graphed_callables on a small MLP, trained for a few steps.

make_graphed_callables captures the module's forward and backward as two CUDA graphs (after
warm-up iterations on a side stream); each call copies the caller's input into the graph's
static input, replays the forward graph, and backward replays the backward graph.
Each step's input batch is written on a side stream (a "prefetch").
clean: the default stream waits for the side stream (torch.cuda.current_stream().wait_stream)
       before the graphed module is called: a clean program, no finding expected (the graphs'
       own nodes included).
racy: the graphed module is called without that wait: the copy of the batch into the graph's
      static input (a cudaMemcpyAsync on the default stream) may read it while the side
      stream's copy still writes it.

Run: streamrace run -- python samples/torch/graphed_callables.py racy|clean
"""
import sys

import torch


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "clean"
    assert mode in ("racy", "clean"), "usage: graphed_callables.py racy|clean"
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sample = torch.randn(64, 256, device="cuda")  # requires_grad as the real input's
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    source = torch.randn(64, 256, device="cuda")
    target = torch.randint(0, 10, (64,), device="cuda")
    batch = torch.empty(64, 256, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    for _ in range(3):
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)  # widen the window: the batch lands late
            batch.copy_(source)
        if mode == "clean":
            torch.cuda.current_stream().wait_stream(side)
        out = graphed(batch)
        loss = torch.nn.functional.cross_entropy(out, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    print(f"graphed_callables.py {mode} done, loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
