#!/usr/bin/env bash
# Install everything the tests need and run the whole suite. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv "[test]"
# The real local Slurm cluster of tests/slurm (scripts/local-slurm-cluster). Not fatal here: without
# the packages the slurm_cluster fixture fails those tests with the reason (it never skips silently).
apt_install slurm-wlm munge chromium || echo "warning: could not install slurm-wlm munge" >&2
# The real PostgreSQL of tests/history (the postgres_server fixture starts a private one; it fails, never
# skips, without the package).
apt_install postgresql || echo "warning: could not install postgresql" >&2
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
