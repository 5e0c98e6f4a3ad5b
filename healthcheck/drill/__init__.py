"""Fault drills: inject a fault on a running Slurm cluster that has our hooks installed, and measure
what happens (time to detect, drain, requeue, resume; whether anything was lost).

- ``model``: ``Timeline`` (monotonic marks) and ``DrillResult`` (per-stage timings, ``to_dict``, the
  spool record ``drill.<name>`` the history ingests); pure.
- ``cluster``: the Slurm side: scontrol/sbatch/squeue through the subprocess seam, the daemons'
  pid files, waiting for a state.
- ``site``: the drill's workspace: the site config, the installed hooks, the per-node bundles the
  hooks read, the spool and state folders.
- ``drills``: the five drills and their catalog (``DRILLS``).

See docs/commissioning.md ("Fault drills").
"""
