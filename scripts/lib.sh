# Shared set-up steps for scripts/run-check.sh and scripts/run-tests.sh (sourced, not run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HEALTHCHECK_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"

apt_install() {  # apt_install PKG... — only as root, only what is missing
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
        return 1
    fi
    echo "installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

ensure_python() {  # a Python >= 3.11 with venv support
    if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11)' 2>/dev/null; then
        apt_install python3 python3-venv python3-pip
        PY=python3
    fi
}

ensure_venv() {  # ensure_venv EXTRAS — create the venv and install the project into it
    local extras="$1"
    ensure_python
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    "$VENV/bin/python" -m pip install -q -e "$ROOT${extras}" --config-settings editable_mode=compat 2>&1 | grep -v '^WARNING: Location' >&2 || true
    "$VENV/bin/python" -c 'import healthcheck, click, pynvml, ClusterShell' \
        || { echo "installing the project into $VENV failed" >&2; exit 1; }
    # Compiled bytecode, even where PYTHONDONTWRITEBYTECODE is set: every prolog run pays for compiling.
    "$VENV/bin/python" -m compileall -q -j 0 "$ROOT/healthcheck" "$VENV/lib" >/dev/null || true
}
