#!/usr/bin/env bash
# healthcheck-textfile.sh: write `healthcheck check --format prometheus` for node_exporter's textfile
# collector, atomically (a temporary file in the same directory, then a rename: node_exporter never
# reads half a file, and it reads only *.prom, so the temporary name is never scraped).
#
# Usage: healthcheck-textfile.sh [ARGS FOR healthcheck check ...]
#   e.g. healthcheck-textfile.sh --config /etc/healthcheck/healthcheck.toml
# Environment (all optional):
#   HEALTHCHECK                the healthcheck executable (default /opt/healthcheck/.venv/bin/healthcheck)
#   HEALTHCHECK_TEXTFILE_DIR   node_exporter's --collector.textfile.directory
#                              (default /var/lib/node_exporter/textfile_collector)
#   HEALTHCHECK_TEXTFILE_NAME  the file written there (default healthcheck.prom)
#
# Exit status of `healthcheck check`: 0 healthy, 1 a check failed, 2 usage or config error, 3 internal
# error. 1 is data (the metrics say which check failed), so the file is written and this script exits
# 0: an unhealthy node must not look like a broken service. On 2, 3 or anything else the previous
# file is left in place (its healthcheck_last_run_timestamp_seconds ages, the staleness alert fires)
# and this script exits with that status.
set -euo pipefail

healthcheck="${HEALTHCHECK:-/opt/healthcheck/.venv/bin/healthcheck}"
dir="${HEALTHCHECK_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}"
name="${HEALTHCHECK_TEXTFILE_NAME:-healthcheck.prom}"

case "$name" in
    */* | .* | "") echo "healthcheck-textfile: bad file name '$name'" >&2; exit 2 ;;
    *.prom) ;;
    *) echo "healthcheck-textfile: '$name' must end in .prom (node_exporter reads only those)" >&2; exit 2 ;;
esac
if [[ ! -d "$dir" ]]; then
    echo "healthcheck-textfile: textfile directory $dir does not exist" >&2
    exit 2
fi

# Same directory as the target, so that mv is a rename(2) on one filesystem; no .prom suffix.
tmp="$(mktemp "$dir/.$name.XXXXXX")"
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

status=0
"$healthcheck" check --format prometheus "$@" >"$tmp" || status=$?
case "$status" in
    0 | 1) ;;
    *)
        echo "healthcheck-textfile: healthcheck check exited $status; keeping the previous $dir/$name" >&2
        exit "$status"
        ;;
esac
if [[ ! -s "$tmp" ]]; then
    echo "healthcheck-textfile: healthcheck check printed nothing; keeping the previous $dir/$name" >&2
    exit 3
fi
chmod 0644 "$tmp"
mv -f -- "$tmp" "$dir/$name"
trap - EXIT
exit 0
