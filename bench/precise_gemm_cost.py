"""Precise mode's cost on cuBLAS GEMMs (issue #11 part 4): milliseconds per matrix product for
a few shapes and dtypes, timed with CUDA events around REPEAT products after WARMUP. Run it
untraced and under `streamrace run --precise=all` (or a regex) and compare line by line:

    python3 bench/precise_gemm_cost.py            # prints "gemm DTYPE MxKxN ms_per_op X"
"""
import sys

import torch

REPEAT = int(sys.argv[1]) if len(sys.argv) > 1 else 10
WARMUP = 2
SHAPES = [(1024, 1024, 1024), (8192, 768, 2304), (4096, 4096, 4096)]  # (M, K, N); the second is GPT-2's QKV
DTYPES = [torch.bfloat16, torch.float32]


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype in DTYPES:
        for m, k, n in SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            for _ in range(WARMUP):
                c = a @ b
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(REPEAT):
                c = a @ b
            end.record()
            torch.cuda.synchronize()
            name = str(dtype).replace("torch.", "")
            print(f"gemm {name} {m}x{k}x{n} ms_per_op {start.elapsed_time(end) / REPEAT:.3f}", flush=True)
            del a, b, c


if __name__ == "__main__":
    main()
