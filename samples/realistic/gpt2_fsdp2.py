"""GPT-2 124M (random init, no weights, no network) trained with PyTorch FSDP2, one rank.

    torchrun --standalone --nproc_per_node=1 samples/realistic/gpt2_fsdp2.py --steps 60
    python3 samples/realistic/gpt2_fsdp2.py --steps 60          # one rank, no launcher

`fully_shard` on every GPT2Block and on the root, MixedPrecisionPolicy with bf16 parameters
and fp32 gradient reduction, torch.optim.AdamW. FSDP2 all-gathers each block's parameters on
its own streams ahead of use and reduce-scatters gradients during backward.
Prints `median_step_ms X` (wall time per step between synchronisations, after --warmup steps).
"""
import argparse
import os
import sys

import realistic_common as rc


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rc.add_job_args(p)
    p.add_argument("--reshard-after-forward", choices=["true", "false"], default="true",
                   help="FSDP2 reshard_after_forward for the blocks (default true)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="cpu: a smoke test with gloo")
    a = p.parse_args(argv)
    if a.steps < 1 or a.warmup < 0:
        p.error("--steps >= 1 and --warmup >= 0")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    rc.single_rank_env()
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import GPT2LMHeadModel

    device = rc.pick_device(a.device)
    if device.type == "cuda":
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device.type, (world,))
    torch.manual_seed(a.seed)  # same initial weights on every rank
    with device:
        model = GPT2LMHeadModel(rc.gpt2_config(a.tiny, a.seq))
    nparams = sum(p.numel() for p in model.parameters())
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=a.reshard_after_forward == "true")
    fully_shard(model, mesh=mesh, mp_policy=mp)  # embeddings, final norm, tied lm_head
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    vocab = model.config.vocab_size
    gen = torch.Generator(device=device).manual_seed(a.seed + rank)
    batches = [torch.randint(0, vocab, (a.batch, a.seq), device=device, generator=gen) for _ in range(4)]
    if rank == 0:
        print(f"gpt2_fsdp2: torch {torch.__version__} device {device} world {world} params {nparams / 1e6:.1f}M "
              f"batch {a.batch}x{a.seq} reshard_after_forward {a.reshard_after_forward}", flush=True)
    timer = rc.StepTimer(device, a.warmup)
    loss = None
    for i in range(a.warmup + a.steps):
        x = batches[i % len(batches)]
        timer.start()
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        timer.stop()
    if rank == 0:
        print(f"final_loss {loss.float().item():.4f}", flush=True)
    timer.report(rank)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
