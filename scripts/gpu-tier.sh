#!/usr/bin/env bash
# The GPU tier on one node with NVIDIA GPUs, PyTorch and healthcheck's dependencies importable by
# $PYTHON (default python3): what only a real device can prove. Writes everything under OUTDIR:
#
#   facts.txt          driver, GPUs, python, torch, CUDA
#   nvml.txt           benchmarks/nvml_calls.py --live: each NVML function's calls and time in one probe,
#                      nvmlInit, the whole probe, nvidia-smi -q, the NVLink counters by call and by field
#   prolog.txt         benchmarks/bench_prolog.py --pairs 20: the hooks on this GPU node (GPU checks live)
#   check.json         `healthcheck check --format json`: every default check, live
#   node.tar.gz        `healthcheck collect`: a real bundle of this node (fixtures, offline checks)
#   gpu-tests.log/xml  pytest -m gpu tests/gpu (live NVML probe, real GEMM, bandwidth, telemetry,
#                      and the goal: our GEMM phase >= 90 % of a bare matmul loop's average, as long)
#   bench_gemm.txt     benchmarks/bench_gemm.py: our verified GEMM against the bare loop, per GPU
#   burnin.json        `healthcheck burnin run --suite quick --phases checks,gemm,bandwidth`
#   train.txt          benchmarks/bench_train.py --gpu --model small: the training smoke test (docs/train.md)
#                      on every GPU (NCCL, bf16): step time, tokens/s, SM activity, kill and resume
#
# Usage: scripts/gpu-tier.sh [OUTDIR] [GEMM_SECONDS]     (default OUTDIR ./gpu-tier-<time>, 20 s)
# healthcheck must be importable by $PYTHON in isolated mode (installed, or a .pth file naming this tree):
# the prolog benchmark runs the hooks and the agent as slurmd would, with -I.
# Exit status: the worst of the steps (0 when all passed). Each step is bounded by `timeout`.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-gpu-tier-$(date -u +%Y%m%dT%H%M%SZ)}
secs=${2:-20}
py=${PYTHON:-python3}
mkdir -p "$out" || exit 2
cd "$here" || exit 2
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
rc=0
exec 3>&2  # the step headers reach the terminal even when a step's output goes to a file
step() {  # step NAME LIMIT_S CMD...: run, keep the worst status, never stop the others
    local name=$1 limit=$2
    shift 2
    echo "== $name" >&3
    timeout -k 10 "$limit" "$@"
    local s=$?
    [ "$s" -ne 0 ] && echo "== $name: exit $s" >&3 && [ "$s" -gt "$rc" ] && rc=$s
    return 0
}

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,vbios_version,memory.total --format=csv 2>&1
    "$py" -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__,
"cuda", torch.version.cuda, "devices", torch.cuda.device_count())' 2>&1
} > "$out/facts.txt"
step nvml 120 "$py" benchmarks/nvml_calls.py --live --runs 20 > "$out/nvml.txt" 2>&1
step prolog 240 "$py" benchmarks/bench_prolog.py --pairs 20 > "$out/prolog.txt" 2>&1
step check 120 "$py" -m healthcheck.cli check --format json > "$out/check.json" 2> "$out/check.log"
step collect 300 "$py" -m healthcheck.cli collect --output "$out/node.tar.gz"
step gpu-tests 420 "$py" -m pytest -q -m gpu tests/gpu -p no:cacheprovider --junitxml "$out/gpu-tests.xml" \
    -o addopts="-ra" > "$out/gpu-tests.log" 2>&1
step bench-gemm $((secs * 3 + 120)) "$py" benchmarks/bench_gemm.py --backend torch --duration "$secs" \
    > "$out/bench_gemm.txt" 2>&1
step burnin $((secs * 2 + 300)) "$py" -m healthcheck.cli burnin run --suite quick --phases checks,gemm,bandwidth \
    --duration "$secs" --node "$(hostname -s)" --spool "$out/spool" --results-dir "$out/results" --format json \
    > "$out/burnin.json" 2> "$out/burnin.log"
step train 900 "$py" benchmarks/bench_train.py --gpu --model small \
    --ranks "$("$py" -c 'import torch; print(max(1, torch.cuda.device_count()))')" > "$out/train.txt" 2>&1
tail -n 3 "$out/gpu-tests.log" >&2
cat "$out/bench_gemm.txt" >&2
echo "gpu tier: exit $rc, files in $out" >&2
exit "$rc"
