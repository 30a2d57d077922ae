"""An async all-reduce whose buffer is overwritten before the collective is waited on.

racy: dist.all_reduce(grad, async_op=True), then the next step's gradients are copied into
      `grad` on the compute stream without work.wait(): the copy races with NCCL's
      reads and writes of the same buffer on the NCCL stream.
clean: work.wait() first (the compute stream waits for the NCCL stream).

Run on 2 GPUs: streamrace run -- torchrun --nproc_per_node=2 samples/torch/nccl_allreduce.py racy|clean
"""
import os
import sys

import torch
import torch.distributed as dist


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "racy"
    assert mode in ("racy", "clean"), "usage: nccl_allreduce.py racy|clean"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    n = 1 << 20
    grad = torch.ones(n, device="cuda")
    next_grad = torch.full((n,), 2.0, device="cuda")
    dist.all_reduce(grad)  # warm-up: communicator set up, buffers registered
    torch.cuda.synchronize()

    work = dist.all_reduce(grad, async_op=True)
    if mode == "clean":
        work.wait()
    grad.copy_(next_grad)  # the next step's gradients land in the same bucket
    work.wait()
    torch.cuda.synchronize()
    print(f"rank {dist.get_rank()} nccl_allreduce.py {mode} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
