"""The training smoke test (issue 34): a small decoder-only transformer trained with DistributedDataParallel
on a deterministic synthetic token stream, across the allocation, then judged (docs/train.md).

- ``spec``: a run's sizes and injected faults, and the judging data (``data/train.toml``); pure.
- ``data``, ``model``, ``run``: the worker, one process per rank (``python -m healthcheck.burnin.train.run``);
  the only modules that import torch.
- ``activity``: GPU SM activity sampled during the run (DCGM's profiling field, else NVML).
- ``judge``: pure: the curve against its reference, the ranks' agreement, the resume, throughput, activity.
- ``phase``: the orchestration (the launcher through the subprocess seam, kill and resume, checkpoints
  removed), the findings.
"""
