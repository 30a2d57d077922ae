"""Tracer overhead on a GPU-bound PyTorch training step (issue 3, item 9).

Prints the median step time in ms of an 8-layer transformer encoder training step
(forward, backward, AdamW). scripts/gpu/tracer_batch.sh runs it untraced, traced
(libstreamrace.so preloaded) and with TORCH_CUDA_SANITIZER=1, and writes the comparison
to bench/results/tracer_overhead.md.
"""
import statistics
import sys
import time

import torch


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=8).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 512, 1024, device="cuda")
    times = []
    for i in range(steps + 10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 10:
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"median_step_ms {statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
