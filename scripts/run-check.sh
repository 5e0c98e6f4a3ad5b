#!/usr/bin/env bash
# Install healthcheck into a virtualenv and judge this machine with live probes.
# Extra arguments go to `healthcheck check` (e.g. --format json, --config FILE).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv ""   # the node install: click, nvidia-ml-py, ClusterShell (constraints.txt's versions)
exec "$VENV/bin/healthcheck" check "$@"
