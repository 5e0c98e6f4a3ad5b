# Shared set-up steps for scripts/run-check.sh and scripts/run-tests.sh (sourced, not run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HEALTHCHECK_VENV:-$ROOT/.venv}"
# The versions the tests passed with (pip freeze of the test venv): every install here is pinned to them.
CONSTRAINTS="${HEALTHCHECK_CONSTRAINTS:-$ROOT/constraints.txt}"
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

apt_install_no_start() {  # apt_install_no_start PKG... — as apt_install; the packages' daemons are not started
    # invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d; exit 101 = "not now" (a missing file
    # means "start it"). An existing policy is left as it is; ours is removed again afterwards.
    local made=0 rc=0
    if [ "$(id -u)" -eq 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made=1
    fi
    apt_install "$@" || rc=$?
    if [ "$made" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
    return "$rc"
}

ensure_python() {  # a Python >= 3.11 with venv support
    if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11)' 2>/dev/null; then
        apt_install python3 python3-venv python3-pip
        PY=python3
    fi
}

ensure_venv() {  # ensure_venv EXTRAS — create the venv and install the project into it, pinned by $CONSTRAINTS
    local extras="$1"   # "" (the node: click, nvidia-ml-py, ClusterShell) or e.g. "[all,test]"
    ensure_python
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    [ -r "$CONSTRAINTS" ] || { echo "constraints file $CONSTRAINTS is missing" >&2; exit 1; }
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    # compat mode: a plain path entry (no import hook on every prolog run); its deprecation notice is silenced
    PYTHONWARNINGS="ignore:Compat editable installs" \
        "$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" -e "$ROOT${extras}" --config-settings editable_mode=compat 2>&1 | grep -v '^WARNING: Location' >&2 || true
    "$VENV/bin/python" -c 'import healthcheck, click, pynvml, ClusterShell' \
        || { echo "installing the project into $VENV failed" >&2; exit 1; }
    # Compiled bytecode, even where PYTHONDONTWRITEBYTECODE is set: every prolog run pays for compiling.
    "$VENV/bin/python" -m compileall -q -j 0 "$ROOT/healthcheck" "$VENV/lib" >/dev/null || true
}
