"""Pandas analyses over the history frames: pure functions, no database, no I/O, no clock.

Inputs follow the DataFrame contract of ``healthcheck.history.queries.load_frames``:

- runs:    run_id, node, context, job_id, started_at, duration_s, status
- results: run_id, node, started_at, check, component, status, message
- metrics: run_id, node, started_at, check, component, name, value
- actions: record_id, run_id, node, time, action ("drain"|"resume"), reason, job_id, context

Times may be naive (taken as UTC) or tz-aware in any zone (converted to UTC); rows need not be
sorted. Every function returns a new DataFrame with documented columns (an empty input gives an
empty frame with those columns). "Series" below means one ``(node, check, component, name)``
metric series (component is None/NaN for node-level metrics).

Modules:

- ``trends``       metric series per node / per GPU, counter growth rates with reset handling
- ``regressions``  a metric off its own rolling median by more than a fraction
- ``outliers``     fleet outliers among peers of one class (robust z-score, median/MAD)
- ``availability`` drain intervals and durations, flapping nodes, time to first failure, MTBF
- ``risk``         nodes ranked by risk, with the evidence

This package imports pandas: never import it from the Slurm hot path (prolog/epilog/slurm-check).
"""
