#!/usr/bin/env python3
"""streamrace's reproduction of the DeepSpeed ZeRO overlap_comm gradient-bucket race.

A stack of embedding tables (16 x 1024 x 1024 by default) trained with Adam through
``accelerate`` + DeepSpeed.  Each table's gradient is exactly one ZeRO-1 bucket
(``reduce_bucket_size`` 1048576 elements), so every backward pass flushes a bucket per
layer and swaps the two ``ipg_buffer`` halves 15 times: the buffer-reuse pattern of the
race, as often as possible, with the smallest model that shows it.

Launch it through ``debug.sh`` (which calls ``accelerate launch --use_deepspeed``), e.g.

    DS_VERSION=0.14.2 bash samples/deepspeed/debug.sh                     # ZeRO-1, fp16
    DS_VERSION=0.14.2 bash samples/deepspeed/debug.sh --patch_deepspeed   # + per-buffer events
    DS_VERSION=0.14.3 bash samples/deepspeed/debug.sh --stage 3           # ZeRO-3, bf16

Options:
  --patch_deepspeed     apply, at run time, the per-buffer event fix to ZeRO stage 1/2
                        (see patch_zero_stage_1_and_2 below); DeepSpeed's files are untouched
  --stage {1,3}         only used to pick defaults and to check the config matches
  --steps N             training steps (default 20)
  --reduction_delay_cycles N
                        spin the ZeRO reduction stream for N GPU cycles (torch.cuda._sleep)
                        before each bucket flush, to widen the race window; 0 = off
  --initial_scale_power N
                        fp16: start the loss scale at 2**N instead of DeepSpeed's 2**32
                        (with the default every early step overflows and is skipped)
Lines starting with ``SR_`` are machine-readable results for the case study:
  SR_CONFIG, SR_STEP (rank 0), SR_PATCH (per rank), SR_RESULT (per rank).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F


# --------------------------------------------------------------------------------------
# The fix, applied at run time
# --------------------------------------------------------------------------------------
class _PatchStats:
    recorded = 0  # events recorded on the reduction stream after a flush
    waited = 0    # waits of the compute stream on the event of the buffer to be reused


def _fix_applies(opt):
    return (
        getattr(opt, "contiguous_gradients", False)
        and getattr(opt, "overlap_comm", False)
        and getattr(opt, "reduction_stream", None) is not None
    )


def patch_zero_stage_1_and_2():
    """Per-buffer events for DeepSpeedZeroOptimizer's double-buffered gradient bucket.

    DeepSpeed <= 0.14.2 swaps between ``ipg_buffer[0]`` and ``ipg_buffer[1]`` after each
    flush and starts copying the next gradients into the other half on the compute stream,
    with nothing making the compute stream wait until the reduction stream has finished
    with that half (all-reduce, copy-back, partition copy of the bucket before last).

    The fix, as in the user's report but written here as wrappers so that DeepSpeed's own
    code runs unchanged:
      * ``backward``: give the optimizer one event slot per buffer before the pass starts
        (DeepSpeed allocates the two buffers at the start of ``backward``);
      * ``reduce_independent_p_g_buckets_and_remove_grads``: when this call flushes the
        bucket, record an event on the reduction stream right after the flush has been
        queued (for the buffer just flushed), and make the current stream wait on the event
        of the buffer about to be reused, before the gradient is copied into it.
    The flush happens inside the wrapped method (``self.reduce_ipg_grads()``), so the wrapper
    hooks that call on the instance for the duration of the method.  Host-issue order is
    the same as in the user's patch: flush, record, (swap), wait, copy.
    """
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer

    if getattr(DeepSpeedZeroOptimizer, "_streamrace_patched", False):
        return
    orig_backward = DeepSpeedZeroOptimizer.backward
    orig_reduce_independent = DeepSpeedZeroOptimizer.reduce_independent_p_g_buckets_and_remove_grads
    class_reduce_ipg_grads = DeepSpeedZeroOptimizer.reduce_ipg_grads

    def backward(self, loss, retain_graph=False):
        # One slot per ipg buffer; None = never flushed in this pass, nothing to wait for.
        self._streamrace_ipg_events = [None, None]
        return orig_backward(self, loss, retain_graph=retain_graph)

    def reduce_independent_p_g_buckets_and_remove_grads(self, param, i):
        if not _fix_applies(self):
            return orig_reduce_independent(self, param, i)

        def reduce_ipg_grads_then_fence():
            class_reduce_ipg_grads(self)
            flushed = self.ipg_index               # DeepSpeed swaps right after we return
            event = torch.cuda.Event()
            event.record(self.reduction_stream)    # after all the flush's reduction-stream work
            events = getattr(self, "_streamrace_ipg_events", None)
            if events is None:  # flush outside a backward pass started by the wrapper
                events = self._streamrace_ipg_events = [None, None]
            events[flushed] = event
            _PatchStats.recorded += 1
            reused = 1 - flushed                   # the buffer the next copies will write
            if events[reused] is not None:
                torch.cuda.current_stream().wait_event(events[reused])
                _PatchStats.waited += 1

        self.reduce_ipg_grads = reduce_ipg_grads_then_fence  # instance attribute shadows the method
        try:
            return orig_reduce_independent(self, param, i)
        finally:
            del self.reduce_ipg_grads

    DeepSpeedZeroOptimizer.backward = backward
    DeepSpeedZeroOptimizer.reduce_independent_p_g_buckets_and_remove_grads = (
        reduce_independent_p_g_buckets_and_remove_grads
    )
    DeepSpeedZeroOptimizer._streamrace_patched = True


def add_reduction_delay(cycles):
    """Spin the reduction stream before every stage 1/2 bucket flush (widens the window)."""
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer

    orig = DeepSpeedZeroOptimizer.reduce_ipg_grads

    def reduce_ipg_grads(self, *args, **kwargs):
        stream = getattr(self, "reduction_stream", None)
        if stream is not None and getattr(self, "overlap_comm", False):
            with torch.cuda.stream(stream):
                torch.cuda._sleep(cycles)
        return orig(self, *args, **kwargs)

    DeepSpeedZeroOptimizer.reduce_ipg_grads = reduce_ipg_grads


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------
class EmbeddingStack(torch.nn.Module):
    """Sum of ``n_layer`` embedding look-ups of the whole vocabulary, plus a scalar input."""

    def __init__(self, n_layer=16, hidden=1024, vocab=1024):
        super().__init__()
        self.vocab = vocab
        self.tables = torch.nn.ModuleList(torch.nn.Embedding(vocab, hidden) for _ in range(n_layer))
        for table in self.tables:
            torch.nn.init.normal_(table.weight, mean=0.0, std=2e-4)

    def forward(self, x):
        ids = torch.arange(self.vocab, device=x.device)
        h = x
        for table in self.tables:
            h = h + table(ids)
        return h.mean()


# --------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--patch_deepspeed", action="store_true")
    p.add_argument("--stage", type=int, choices=(1, 3), default=None)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--reduction_delay_cycles", type=int, default=0)
    p.add_argument("--initial_scale_power", type=int, default=None,
                   help="fp16 only: override DeepSpeed's initial loss scale 2**N (its default, 2**32, "
                        "makes every one of the first ~20 steps of this model overflow and be skipped)")
    p.add_argument("--no_deterministic", action="store_true",
                   help="do not call torch.use_deterministic_algorithms(True, warn_only=True)")
    return p.parse_args(argv)


def _engine_cfg(engine, getter):
    fn = getattr(engine, getter, None)
    try:
        return fn() if fn is not None else None
    except Exception:  # informational only
        return None


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def param_checksum(model):
    """Sum and sum of squares of this rank's parameter data (stage 3: its partition)."""
    dev = next(model.parameters()).device
    s = torch.zeros((), dtype=torch.float64, device=dev)
    q = torch.zeros((), dtype=torch.float64, device=dev)
    with torch.no_grad():
        for prm in model.parameters():
            t = getattr(prm, "ds_tensor", prm)
            t = t.detach().double()
            s += t.sum()
            q += (t * t).sum()
    return s.item(), q.item()


def main(argv=None):
    args = parse_args(argv)

    from accelerate import Accelerator
    from accelerate.utils import set_seed
    import deepspeed

    if not args.no_deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    if args.patch_deepspeed:
        patch_zero_stage_1_and_2()
    if args.reduction_delay_cycles > 0:
        add_reduction_delay(args.reduction_delay_cycles)

    accelerator = Accelerator()
    rank = accelerator.process_index
    ds_cfg = accelerator.state.deepspeed_plugin.deepspeed_config
    stage = ds_cfg.get("zero_optimization", {}).get("stage")
    if args.stage is not None and args.stage != stage:
        raise SystemExit(f"--stage {args.stage} but the DeepSpeed config has stage {stage}")
    if args.patch_deepspeed and stage not in (1, 2):
        accelerator.print(f"[train.py] --patch_deepspeed affects ZeRO stage 1/2 only; stage is {stage}")

    if args.initial_scale_power is not None and ds_cfg.get("fp16", {}).get("enabled") in (True, "true", "auto"):
        ds_cfg["fp16"]["initial_scale_power"] = args.initial_scale_power

    set_seed(args.seed)  # identical initial weights on every rank
    model = EmbeddingStack(args.layers, args.hidden, args.vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer = accelerator.prepare(model, optimizer)
    set_seed(args.seed + 1 + rank)  # different data on each rank
    dtype = next(model.parameters()).dtype
    zopt = getattr(optimizer, "optimizer", optimizer)

    if rank == 0:
        print("SR_CONFIG " + json.dumps({
            "deepspeed": deepspeed.__version__, "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            "world_size": accelerator.num_processes, "stage": stage, "dtype": str(dtype),
            "optimizer": type(zopt).__name__,
            "reduce_bucket_size": _engine_cfg(model, "zero_reduce_bucket_size"),
            "overlap_comm": _engine_cfg(model, "zero_overlap_comm"),
            "contiguous_gradients": _engine_cfg(model, "zero_contiguous_gradients"),
            "patch_deepspeed": args.patch_deepspeed,
            "reduction_delay_cycles": args.reduction_delay_cycles,
            "csan": os.environ.get("TORCH_CUDA_SANITIZER", ""),
            "steps": args.steps,
        }), flush=True)

    device = accelerator.device
    timed_from = min(2, args.steps - 1)  # skip warm-up steps in the timing
    t_start = None
    losses = []
    for step in range(args.steps):
        if step == timed_from:
            _sync()
            t_start = time.perf_counter()
        x = torch.rand(1, dtype=dtype, device=device)
        y = torch.rand(1, dtype=dtype, device=device)
        optimizer.zero_grad()
        out = model(x)
        loss = F.mse_loss(out.float().reshape(1), y.float())
        accelerator.backward(loss)
        optimizer.step()
        gnorm = model.get_global_grad_norm() if hasattr(model, "get_global_grad_norm") else None
        gnorm = float(gnorm) if gnorm is not None else float("nan")
        losses.append(loss.item())
        if rank == 0:
            print(f"SR_STEP rank={rank} step={step} loss={losses[-1]:.9g} grad_norm={gnorm:.9g}", flush=True)
    _sync()
    elapsed = time.perf_counter() - t_start if t_start is not None else float("nan")
    timed_steps = args.steps - timed_from

    csum, csq = param_checksum(model)
    if args.patch_deepspeed:
        print(f"SR_PATCH rank={rank} events_recorded={_PatchStats.recorded} "
              f"waits={_PatchStats.waited}", flush=True)
    print("SR_RESULT " + json.dumps({
        "rank": rank, "steps": args.steps, "timed_steps": timed_steps,
        "step_ms": 1000.0 * elapsed / max(timed_steps, 1),
        "final_loss": losses[-1] if losses else None,
        "param_sum": csum, "param_sumsq": csq,
    }), flush=True)
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
