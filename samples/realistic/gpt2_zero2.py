"""GPT-2 124M (random init, no weights, no network) trained with DeepSpeed ZeRO-2, one rank.

    torchrun --standalone --nproc_per_node=1 samples/realistic/gpt2_zero2.py --steps 60
    deepspeed --num_gpus 1 samples/realistic/gpt2_zero2.py --steps 60
    python3 samples/realistic/gpt2_zero2.py --steps 60          # one rank, no launcher

ZeRO-2 with overlap_comm and contiguous_gradients: gradients are copied into reduce buckets on
the compute stream and reduced on DeepSpeed's reduction stream, the schedule streamrace checks.
bf16 weights/activations, fp32 master weights, torch.optim.AdamW (no DeepSpeed op is built).
Prints `median_step_ms X` (wall time per step between synchronisations, after --warmup steps).

    python3 samples/realistic/gpt2_zero2.py --ab 10      # under `streamrace run` or bench/cupti_floor

--ab PAIRS (instead of --steps): after the warm-up, PAIRS pairs of blocks of --ab-block steps
with the tracer paused and on (streamrace_bench_pause: its CUDA callbacks and PyTorch allocator
events), the order swapped every pair, so the machine's drift between processes cancels out.
Prints `ab_on_ms`, `ab_off_ms`, `ab_added_ms` and `ab_added_pct` (realistic_common.ab_steps).
"""
import argparse
import os
import sys

import realistic_common as rc


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rc.add_job_args(p)
    p.add_argument("--bucket", type=float, default=5e7,
                   help="reduce_bucket_size and allgather_bucket_size in elements (default 5e7)")
    p.add_argument("--no-overlap", action="store_true", help="overlap_comm false (default true)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="cpu: a smoke test with DS_ACCELERATOR=cpu and gloo")
    p.add_argument("--ab", type=int, default=0, metavar="PAIRS",
                   help="in-process on/off pairs of step blocks (needs streamrace_bench_pause)")
    p.add_argument("--ab-block", type=int, default=3, help="steps per --ab block (default 3)")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)  # deepspeed launcher
    a = p.parse_args(argv)
    if a.steps < 1 or a.warmup < 0:
        p.error("--steps >= 1 and --warmup >= 0")
    if a.ab < 0 or a.ab_block < 1:
        p.error("--ab >= 0 and --ab-block >= 1")
    return a


def ds_config(a):
    bucket = int(a.bucket)
    return {
        "train_micro_batch_size_per_gpu": a.batch,
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": 2,
            "overlap_comm": not a.no_overlap,
            "contiguous_gradients": True,
            "reduce_scatter": True,
            "reduce_bucket_size": bucket,
            "allgather_bucket_size": bucket,
        },
        # torch_adam: torch.optim.AdamW, so no DeepSpeed op (FusedAdam) is JIT-built.
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01, "torch_adam": True}},
        "gradient_clipping": 1.0,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.device == "cpu":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    rc.single_rank_env()
    import torch
    import deepspeed
    from transformers import GPT2LMHeadModel

    device = rc.pick_device(a.device)
    deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo",
                               auto_mpi_discovery=False)
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(a.seed + rank)
    model = GPT2LMHeadModel(rc.gpt2_config(a.tiny, a.seq))
    nparams = sum(p.numel() for p in model.parameters())
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config(a))
    vocab = model.config.vocab_size
    gen = torch.Generator(device=device).manual_seed(a.seed + rank)
    # A few random batches made up front, cycled, so no host-to-device copy or RNG sits in the step.
    batches = [torch.randint(0, vocab, (a.batch, a.seq), device=device, generator=gen) for _ in range(4)]
    if rank == 0:
        print(f"gpt2_zero2: deepspeed {deepspeed.__version__} torch {torch.__version__} device {device} "
              f"params {nparams / 1e6:.1f}M batch {a.batch}x{a.seq} bucket {int(a.bucket)} "
              f"overlap_comm {not a.no_overlap}", flush=True)
    timer = rc.StepTimer(device, a.warmup)
    loss = None
    done = 0

    def step():
        nonlocal loss, done
        x = batches[done % len(batches)]
        loss = engine(input_ids=x, labels=x).loss
        engine.backward(loss)
        engine.step()
        done += 1

    if a.ab:
        for _ in range(a.warmup):
            step()
        rc_ab = rc.ab_steps(step, device, a.ab, a.ab_block, "gpt2_zero2")
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        return rc_ab
    for _ in range(a.warmup + a.steps):
        timer.start()
        step()
        timer.stop()
    if rank == 0:
        print(f"final_loss {loss.float().item():.4f}", flush=True)
    timer.report(rank)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
