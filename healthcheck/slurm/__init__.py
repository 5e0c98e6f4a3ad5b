"""The Slurm library the hook, burn-in, sweep and drill share: the backends (``backend``, ``backend_base``,
``pyslurm_backend``), node states (``nodestate``), our drain reasons (``reasons``), drain/resume with the
ownership rules (``policy``, pure) and their side effects (``actions``, ``ledger``, ``pending``,
``draincap``), the per-job counter baselines (``baseline``). ``agentclient``, ``hooks`` and ``agent`` here
only forward to their new homes for what an earlier release installed."""
