"""Slurm integration: hooks (prolog/epilog/HealthCheckProgram), drain/resume with ownership rules."""
