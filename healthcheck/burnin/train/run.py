"""The training worker: one process per rank, started by the launcher (``srun ... python -m
healthcheck.burnin.train.run --spec SPEC --out DIR``). Its rank and world come from Slurm
(``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` elsewhere);
the ranks meet through ``MASTER_ADDR``/``MASTER_PORT`` when set, else through a file in the run directory
(``--rendezvous``, on the shared filesystem). Never reaches the network beyond its peers.

What it leaves in ``--out`` (the judge's input, read by ``phase.py``):

- ``metrics.jsonl`` (rank 0): one line per step: ``step``, ``loss`` (the global batch's mean), ``probe``
  (each rank's loss on the common probe sequence), ``grad`` (each rank's sum of the reduced gradient it
  applied), ``step_s`` and ``tokens_per_s`` per rank, ``wall``
  (epoch seconds at the step's end); and one line per checkpoint (``checkpoint``, ``bytes``, ``seconds``);
- ``rank-R.json``: the rank's node, device and local rank;
- ``killed-R.json``: the step and instant a rank killed itself on purpose (``kill_at``);
- ``activity-NODE.json``: the GPUs' SM activity samples (each node's first rank, GPUs only);
- ``done.json`` (rank 0): the run completed.

Checkpoints: rank 0 writes ``step-NNNNNN.pt`` into the spec's ``checkpoint_dir`` every
``checkpoint_every`` steps (atomically; the previous one removed), every rank reads the latest on
``resume``. The orchestrator removes the folder at the end.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import socket
import sys
import time


def _env_int(*names: str, default: int | None = None) -> int:
    for name in names:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    if default is None:
        raise SystemExit(f"train worker: none of {', '.join(names)} is set (start it under srun)")
    return default


def latest_checkpoint(folder: str) -> tuple[int, str] | None:
    """(step, path) of the newest ``step-NNNNNN.pt`` in ``folder``; None when there is none."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith("step-") and n.endswith(".pt")]
    except FileNotFoundError:
        return None
    steps = sorted((int(n[5:-3]), os.path.join(folder, n)) for n in names if n[5:-3].isdigit())
    return steps[-1] if steps else None


def _append(path: str, obj: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(obj, allow_nan=False) + "\n")
        fh.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m healthcheck.burnin.train.run")
    parser.add_argument("--spec", required=True, help="the run's TrainSpec as JSON (a file)")
    parser.add_argument("--out", required=True, help="the run's output folder (shared by every rank)")
    parser.add_argument("--rendezvous", help="file the ranks meet through when MASTER_ADDR is not set")
    args = parser.parse_args(argv)

    from .spec import TrainSpec, check

    with open(args.spec, encoding="utf-8") as fh:
        spec = TrainSpec.from_json(fh.read())
    rank = _env_int("SLURM_PROCID", "RANK")
    world = _env_int("SLURM_NTASKS", "WORLD_SIZE")
    local = _env_int("SLURM_LOCALID", "LOCAL_RANK", default=0)
    check(spec, world)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]

    import datetime

    if spec.backend == "nccl":  # cuBLAS picks reproducible kernels only with a fixed workspace (CUDA docs)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from . import data
    from .model import Decoder, parameter_count, sequence_losses

    gpu = spec.backend == "nccl"
    if gpu:  # a launcher that binds one GPU per task leaves each rank one visible device
        index = local % max(1, torch.cuda.device_count())
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # one core per rank: reproducible sums, no oversubscription
    torch.use_deterministic_algorithms(True, warn_only=gpu)
    init = "env://" if os.environ.get("MASTER_ADDR") else f"file://{os.path.abspath(args.rendezvous or '')}"
    if init == "file://" + os.path.abspath(""):
        raise SystemExit("train worker: set MASTER_ADDR/MASTER_PORT or give --rendezvous FILE")
    dist.init_process_group(spec.backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=spec.collective_timeout_s))
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w", encoding="utf-8") as fh:
        json.dump({"rank": rank, "node": node, "local": local, "pid": os.getpid(),
                   "device": torch.cuda.get_device_name(device) if gpu else "cpu"}, fh)

    torch.manual_seed(spec.seed)
    model = Decoder(spec.vocab, spec.d_model, spec.layers, spec.heads, spec.seq_len).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if gpu else None)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr * spec.lr_scale, betas=(0.9, 0.95), weight_decay=0.0)
    table = data.chain(spec.vocab, spec.seed)
    start = 1
    if spec.resume:
        found = latest_checkpoint(spec.checkpoint_dir)
        if found is not None:
            state = torch.load(found[1], map_location=device, weights_only=True)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optim"])
            start = int(state["step"]) + 1
    sampler = None
    if gpu and local == 0 and spec.sample_activity:
        from .activity import Sampler

        sampler = Sampler(list(range(torch.cuda.device_count())))
        sampler.start()
    metrics = os.path.join(args.out, "metrics.jsonl")
    tokens = spec.global_batch // world * spec.seq_len
    for step in range(start, spec.steps + 1):
        t0 = time.perf_counter()
        batch = data.shard(data.global_batch(step, table, spec.global_batch, spec.seq_len, spec.seed),
                           rank, world).to(device)
        for group in opt.param_groups:
            group["lr"] = spec.lr * spec.lr_scale * min(1.0, step / max(1, spec.warmup_steps))
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=gpu and spec.dtype == "bf16"):
            losses = sequence_losses(ddp, batch)
        train = losses[1:].mean()
        train.backward()  # DDP's gradient all-reduce happens here
        if rank == spec.corrupt_rank and step == spec.corrupt_step:
            for p in model.parameters():  # this rank applies a reduced gradient the others did not
                p.grad.mul_(8.0)
        # the gradient this rank applies: after the all-reduce every replica holds the same bits
        grad_sum = float(sum(p.grad.double().sum() for p in model.parameters() if p.grad is not None))
        opt.step()
        if gpu:
            torch.cuda.synchronize(device)
        took = time.perf_counter() - t0
        mine = torch.tensor([float(train.detach()) * (losses.shape[0] - 1), losses.shape[0] - 1,
                             float(losses[0].detach()), took, grad_sum], dtype=torch.float64, device=device)
        got = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(got, mine)
        rows = [g.tolist() for g in got]
        if rank == 0:
            _append(metrics, {"step": step, "loss": sum(r[0] for r in rows) / sum(r[1] for r in rows),
                              "probe": [r[2] for r in rows], "grad": [r[4] for r in rows],
                              "step_s": [r[3] for r in rows],
                              "tokens_per_s": [tokens / r[3] if r[3] > 0 else 0.0 for r in rows],
                              "wall": time.time()})
            if spec.checkpoint_dir and step % spec.checkpoint_every == 0:
                _checkpoint(spec.checkpoint_dir, step, model, opt, metrics)
        if spec.kill_at and step == spec.kill_at and (spec.kill_mode == "step" or rank == spec.kill_rank):
            with open(os.path.join(args.out, f"killed-{rank}.json"), "w", encoding="utf-8") as fh:
                json.dump({"rank": rank, "node": node, "step": step, "wall": time.time()}, fh)
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    if sampler is not None:
        sampler.stop()
        with open(os.path.join(args.out, f"activity-{node}.json"), "w", encoding="utf-8") as fh:
            json.dump(sampler.result(), fh)
    dist.barrier()  # every rank got here: the run is complete
    if rank == 0:
        with open(os.path.join(args.out, "done.json"), "w", encoding="utf-8") as fh:
            json.dump({"world": world, "steps": spec.steps, "start": start, "params": parameter_count(model),
                       "torch": torch.__version__, "wall": time.time()}, fh)
    # no destroy_process_group(): its teardown can wait on a peer that already left; the sockets and the
    # store go with the process (the orchestrator removes the rendezvous file)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _checkpoint(folder: str, step: int, model, opt, metrics: str) -> None:
    """``step-NNNNNN.pt`` written atomically (the one writer), the previous ones removed; its size and
    time go to the metrics (the shared filesystem's write throughput)."""
    import torch

    from ...safeio.atomic import atomic_write, unlink_if_present

    t0 = time.perf_counter()
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step}, buf)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    atomic_write(os.path.join(folder, f"step-{step:06d}.pt"), buf.getvalue(), 0o600)
    for name in os.listdir(folder):
        if name.startswith("step-") and name.endswith(".pt") and name != f"step-{step:06d}.pt":
            unlink_if_present(os.path.join(folder, name))
    _append(metrics, {"checkpoint": step, "bytes": buf.getbuffer().nbytes, "seconds": time.perf_counter() - t0})


if __name__ == "__main__":
    sys.exit(main())
