"""The training phase set up from the burn-in's settings (no torch imported here): which model, backend
and dtype (GPUs on the batch host's PCI bus: NCCL, bf16, the "small" model, one rank per GPU; otherwise
gloo, fp32, "tiny", one rank per node), where it runs (``<results_dir>/train-<job>``, shared), the data
file, and ``--record-reference``'s entry."""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable

from ...core.model import Finding, Status
from . import judge
from .phase import Launch, TrainOutcome, run_phase
from .spec import TrainData, TrainDataError, curve_entry, load, world_class


def train_data(path: str) -> TrainData:
    """The packaged data and the site's file (as root: root's alone, like every file that steers a burn-in)."""
    if path:
        from ...safeio.trust import check_trusted, running_as_root

        if running_as_root():
            check_trusted(path, "train references file")
    return load(path or None)


def run_for_allocation(nodes: list[str], settings: Any, job_id: str | None,
                       log: Callable[[str], None] = lambda _m: None, *, local_ranks: int = 0,
                       data: TrainData | None = None, **faults: Any) -> TrainOutcome:
    """The phase on ``nodes`` through the settings' launcher (or ``local_ranks`` processes here)."""
    from ...probes.nvml import nvidia_gpu_present

    try:
        data = data or train_data(settings.train_references)
    except (TrainDataError, OSError) as exc:
        return TrainOutcome([Finding(judge.RUN, Status.ERROR, f"train references: {exc}"[:300])], {}, {})
    if importlib.util.find_spec("torch") is None:
        return TrainOutcome([Finding(judge.RUN, Status.ERROR, "torch is not installed where the job step runs: "
                                     "install PyTorch (a CUDA build on GPU nodes) into the healthcheck environment")],
                            {}, {})
    gpus = len(nvidia_gpu_present())
    model = settings.train_model if settings.train_model != "auto" else ("small" if gpus else "tiny")
    tasks = settings.train_tasks_per_node or max(1, gpus)
    try:
        # the data's seed is the spec's own, not [burnin] seed: it is part of what a reference curve was recorded with
        spec = data.spec(model, backend="nccl" if gpus else "gloo", dtype="bf16" if gpus else "fp32",
                         collective_timeout_s=min(300.0, settings.train_timeout_s), **faults)
    except (TrainDataError, TypeError) as exc:
        return TrainOutcome([Finding(judge.RUN, Status.ERROR, f"train: {exc}"[:300])], {}, {})
    how = Launch(list(nodes), tasks, tuple(settings.launcher), local_ranks, timeout_s=settings.train_timeout_s)
    workdir = os.path.join(settings.results_dir or os.getcwd(), f"train-{job_id or 'nojob'}")
    try:
        return run_phase(spec, data, how, workdir, resume=settings.train_resume, kill_mode=settings.train_kill_mode,
                         log=log)
    except TrainDataError as exc:  # e.g. a world size that does not divide the model's global batch
        return TrainOutcome([Finding(judge.RUN, Status.ERROR, str(exc)[:300])], {}, {})


def reference_entry(outcome: TrainOutcome, where: str, when: str) -> str:
    """The ``[curve."..."]`` entry of a run fit to be a reference: its ranks agreed and, where it ran, the
    resume matched. ValueError saying why a run is not fit."""
    rec = outcome.record
    loss = (rec.get("full") or {}).get("loss") or []
    bad = [f for f in outcome.findings if f.check in (judge.RANKS, judge.RESUME, judge.RUN)
           and f.status in (Status.FAIL, Status.ERROR)]
    if bad or not loss:
        why = bad[0].message if bad else "the run recorded no loss"
        raise ValueError(f"not recorded as a reference: {why}")
    spec = rec["spec"]
    key = f"{spec['model']}|{spec['backend']}|{spec['dtype']}|{world_class(int(rec['world']))}"
    torch = (rec.get("full") or {}).get("torch") or "?"
    return curve_entry(key, loss, f"healthcheck burnin train --record-reference on {where}, {rec['world']} ranks, "
                                  f"torch {torch}, {when}")
