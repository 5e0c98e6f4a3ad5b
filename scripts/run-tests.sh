#!/usr/bin/env bash
# Install everything the tests need and run the whole suite. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# [all]: history, report, sweep, parquet, burn-in (NumPy); [test]: pytest, hypothesis; pinned by constraints.txt
ensure_venv "[all,test]"
"$VENV/bin/python" -c 'import pytest, hypothesis, sqlalchemy, alembic, pandas, numpy, pyarrow, psycopg' \
    || { echo "installing the [all,test] extras into $VENV failed (see pip's messages above)" >&2; exit 1; }
# The real local Slurm cluster of tests/slurm (scripts/local-slurm-cluster). Not fatal here: without
# the packages the slurm_cluster fixture fails those tests with the reason (it never skips silently).
apt_install slurm-wlm munge chromium || echo "warning: could not install slurm-wlm munge" >&2
# The real PostgreSQL of tests/history (the postgres_server fixture starts a private one; it fails, never
# skips, without the package).
apt_install postgresql || echo "warning: could not install postgresql" >&2
# promtool (Debian's prometheus package) lints our exposition and the example alert rules
# (tests/output); the Prometheus server itself is not started.
apt_install_no_start prometheus || echo "warning: could not install prometheus (promtool)" >&2
# perftest (ib_write_bw) for the burn-in's NIC phase (tests/burnin/test_nic_phase.py runs the real tool: its
# --help and a loopback's failure; the soft-RoCE loopback also needs an rxe device, which needs the kernel's
# rdma_rxe module). Not fatal: without it those tests skip and say why.
apt_install perftest rdma-core ibverbs-providers || echo "warning: could not install perftest rdma-core" >&2
# The burn-in's torch backend, run on the CPU (tests/burnin/test_torch_cpu.py). Opt-in: from PyPI a
# plain torch is a CUDA build of several GB; CI's package index serves the 2.13.0 CPU build.
if [ "${HEALTHCHECK_TEST_TORCH:-0}" = 1 ]; then
    if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
        out=$("$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" "torch==2.13.0" 2>&1) \
            || echo "warning: could not install torch: ${out: -600}" >&2
    fi
fi
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
