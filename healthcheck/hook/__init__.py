"""The Slurm hook: what slurmd runs as Prolog, Epilog and HealthCheckProgram. ``run`` (probe in a
watchdog child, judge, decide, act, record within the context's budget), ``client`` (the hooks' Python
entry: the resident agent's socket, else ``run`` here), ``watchdog`` (budgets through a forked child),
``gate``/``gatefacts`` (the fast prolog and what a healthy health check leaves it), ``gpu_samples``."""
