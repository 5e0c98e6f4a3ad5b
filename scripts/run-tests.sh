#!/usr/bin/env bash
# Install everything the tests need and run the whole suite. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv "[test]"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
