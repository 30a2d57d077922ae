"""Shared bits of the realistic samples: offline settings, one-rank distributed env, timing.

Imported by gpt2_zero2.py, gpt2_fsdp2.py and launch_loop.py (same folder, so it is on
sys.path[0] whichever way they are started: python3, torchrun or deepspeed).
"""
import ctypes
import os
import socket
import statistics
import sys
import time

# No network on the GPU machine: transformers / huggingface_hub must never try to reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# NVLink multicast stays off on the shared GPU hosts.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def single_rank_env() -> None:
    """Started with plain python3 (no torchrun / deepspeed launcher): act as rank 0 of 1.

    Without these DeepSpeed would try MPI discovery (mpi4py is on the GPU image).
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))


def pick_device(want: str):
    import torch

    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def find_pause():
    """streamrace_bench_pause of the tracer (preloaded: global) or of the injection library."""
    for path in (None, os.environ.get("CUDA_INJECTION64_PATH")):
        if path is None and "LD_PRELOAD" not in os.environ:
            continue
        try:
            fn = getattr(ctypes.CDLL(path), "streamrace_bench_pause")
        except (OSError, AttributeError, TypeError):
            continue
        fn.argtypes = [ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn
    return None


def alternate(run_block, pairs: int):
    """`pairs` pairs of run_block(paused=False) and run_block(paused=True), the order swapped
    every pair (so that a drift within the process favours neither); returns (on, off)."""
    on, off = [], []
    for i in range(pairs):
        if i % 2 == 0:
            on.append(run_block(False))
            off.append(run_block(True))
        else:
            off.append(run_block(True))
            on.append(run_block(False))
    return on, off


def report_pairs(head: str, on, off, unit: str, pct: bool = False) -> None:
    """The A/B lines both --ab modes print: `head` then how many pairs the paused block won and
    the smallest and largest difference, then ab_on_UNIT, ab_off_UNIT (medians over blocks) and
    ab_added_UNIT (the median of the pairs' differences); with `pct`, ab_added_pct (the median
    of the pairs' ratios less one)."""
    diffs = [a - b for a, b in zip(on, off)]
    won = sum(1 for d in diffs if d > 0)
    print(f"{head}off_won {won}/{len(diffs)} added_min_{unit} {min(diffs):.3f} added_max_{unit} {max(diffs):.3f}",
          flush=True)
    print(f"ab_on_{unit} {statistics.median(on):.3f}", flush=True)
    print(f"ab_off_{unit} {statistics.median(off):.3f}", flush=True)
    print(f"ab_added_{unit} {statistics.median(diffs):.3f}", flush=True)
    if pct:
        print(f"ab_added_pct {100 * statistics.median([a / b - 1 for a, b in zip(on, off)]):.2f}", flush=True)


def ab_steps(step, device, pairs: int, block: int, name: str) -> int:
    """--ab: after the warm-up, `pairs` pairs of blocks of `block` steps with the tracer paused
    and on (streamrace_bench_pause), the order swapped every pair; a block counts as the median
    of its steps. Prints ab_on_ms, ab_off_ms (medians over blocks), ab_added_ms and ab_added_pct
    (the median of the pairs' differences, and of their ratios less one). 2 without the pause."""
    pause = find_pause()
    if pause is None:
        print(f"{name}: --ab needs streamrace_bench_pause (run under `streamrace run` or bench/cupti_floor)",
              file=sys.stderr)
        return 2

    def run_block(paused: bool) -> float:
        if pause(1 if paused else 0) != 0:
            raise RuntimeError("streamrace_bench_pause failed: the tracer is not tracing CUDA calls here")
        times = []
        for _ in range(block):
            sync(device)
            t0 = time.perf_counter()
            step()
            sync(device)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    on, off = alternate(run_block, pairs)
    pause(0)
    report_pairs(f"{name}: pairs {pairs} block {block} ", on, off, "ms", pct=True)
    return 0


class StepTimer:
    """Wall time per step between device synchronisations; steps < warmup are not kept."""

    def __init__(self, device, warmup: int):
        self.device, self.warmup, self.times, self.n = device, warmup, [], 0
        self._t0 = 0.0

    def start(self) -> None:
        sync(self.device)
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        sync(self.device)
        if self.n >= self.warmup:
            self.times.append((time.perf_counter() - self._t0) * 1e3)
        self.n += 1

    def report(self, rank: int = 0) -> None:
        if rank != 0:
            return
        if not self.times:
            print("median_step_ms nan (no timed step)", flush=True)
            return
        print("step_ms_in_order " + " ".join(f"{x:.1f}" for x in self.times), flush=True)
        t = sorted(self.times)
        print(f"timed_steps {len(t)} min_step_ms {t[0]:.3f} max_step_ms {t[-1]:.3f}", flush=True)
        print(f"median_step_ms {statistics.median(t):.3f}", flush=True)


def gpt2_config(tiny: bool, seq: int):
    from transformers import GPT2Config

    if tiny:  # a CPU smoke test of the code path only
        return GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=max(seq, 64), vocab_size=1024,
                          bos_token_id=0, eos_token_id=0)
    cfg = GPT2Config()  # GPT-2 small: 12 layers, 768 wide, 12 heads, 1024 positions, 124M parameters
    if seq > cfg.n_positions:
        raise SystemExit(f"--seq {seq} > n_positions {cfg.n_positions}")
    return cfg


def add_job_args(p) -> None:
    """The options every GPT-2 job takes (steps, warm-up, batch shape, device, size, seed)."""
    p.add_argument("--steps", type=int, default=60, help="timed steps (default 60)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    p.add_argument("--batch", type=int, default=8, help="micro-batch per rank (default 8)")
    p.add_argument("--seq", type=int, default=1024, help="tokens per sample (default 1024)")
    p.add_argument("--tiny", action="store_true", help="a 2-layer 64-wide model (smoke test)")
    p.add_argument("--seed", type=int, default=0)
