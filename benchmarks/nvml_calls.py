"""The NVML probe's cost model: how many NVML calls it makes per node, by function, and the Python time
around them (over the tests' fake pynvml, so without a driver's own time).

    .venv/bin/python benchmarks/nvml_calls.py [--gpus 8] [--runs 20]
    python3 benchmarks/nvml_calls.py --live [--runs 20]      # on a GPU node (scripts/gpu-tier.sh runs it)

Over the fake, the driver's time per call is not in the figures. --live: the real pynvml on this
machine's GPUs: importing pynvml, loading its library and nvmlInit, each in fresh interpreters; each
function's calls and time in one probe; nvmlInit alone, the whole probe, one ``nvidia-smi -q`` process;
each GPU's NVLink counters read both ways (one call per value as the probe does, and one
``nvmlDeviceGetFieldValues`` call), side by side; then the same probe in a session already open, two
probes of one GPU at once, and the field values that could stand for calls beside those calls.
docs/performance.md holds what it measured on an H200. Not part of the test run.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from healthcheck.probes.nvml import probe_gpus  # noqa: E402
from tests.fakes.fake_pynvml import FakeNvml, h100_node  # noqa: E402


class Counting:
    """A pynvml stand-in that counts each ``nvml*`` call it forwards, and sums the wall time each
    function took (µs) into ``micros`` when given one."""

    def __init__(self, inner, counts: Counter, micros: Counter | None = None):
        self._inner, self._counts, self._micros = inner, counts, micros

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if not (name.startswith("nvml") and callable(value)):
            return value

        def call(*args, **kwargs):
            self._counts[name] += 1
            start = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                if self._micros is not None:
                    self._micros[name] += (time.perf_counter() - start) * 1e6
        return call


# ---- --live: on a machine with a real NVIDIA driver --------------------------------------------------

def _ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _fields(nvml, handle, asks: list) -> list:
    """One ``nvmlDeviceGetFieldValues`` call: each field's value, or "error <code>" (the probe's own
    reading, ``_Reader.fields``, keeps only None for these)."""
    from healthcheck.probes.nvml import _VALUE_MEMBER

    return [f"error {item.nvmlReturn}" if item.nvmlReturn else
            int(getattr(item.value, _VALUE_MEMBER.get(item.valueType, "ullVal")))
            for item in nvml.nvmlDeviceGetFieldValues(handle, asks)]


# Measured in fresh interpreters, each printing its milliseconds: what a hook's own process pays
FRESH = {
    "import pynvml": "import time; t = time.perf_counter(); import pynvml; print((time.perf_counter() - t) * 1000)",
    "loading libnvidia-ml (no session)": "import time, pynvml; t = time.perf_counter(); pynvml._LoadNvmlLibrary(); "
                                         "print((time.perf_counter() - t) * 1000)",
    "nvmlInit, the library loaded": "import time, pynvml; pynvml._LoadNvmlLibrary(); t = time.perf_counter(); "
                                    "pynvml.nvmlInit(); print((time.perf_counter() - t) * 1000)",
}


def _fresh_ms(code: str, runs: int) -> str:
    import subprocess

    times = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            return f"n/a ({(proc.stderr.strip().splitlines() or ['failed'])[-1][:80]})"
        times.append(float(proc.stdout))
    return f"{statistics.median(times):.2f} ms median of {runs}"


def _by_call(nvml, handle) -> dict:
    """{(link, counter name): value or 'error <code>'} and the link states, one call per value (the
    probe's way today), links until NotSupported / InvalidArgument."""
    from healthcheck.probes.nvml import _NVLINK_COUNTERS

    out: dict = {}
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            out[(link, "state")] = int(nvml.nvmlDeviceGetNvLinkState(handle, link))
        except nvml.NVMLError as exc:
            out[(link, "state")] = f"error {exc.value}"
            break
        for attr, const in _NVLINK_COUNTERS:
            try:
                out[(link, attr)] = int(nvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, getattr(nvml, const)))
            except nvml.NVMLError as exc:
                out[(link, attr)] = f"error {exc.value}"
    return out


# scoped per link (scopeId = link): the field values that could replace the per-link calls
SCOPED = (("state", "NVML_FI_DEV_NVLINK_GET_STATE"), ("replay_errors", "NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY"),
          ("recovery_errors", "NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY"),
          ("crc_flit_errors", "NVML_FI_DEV_NVLINK_ERROR_DL_CRC"))
# per-link field ids of links 0-5 (ids for 6-11 exist too): CRC data has no scoped field
LEGACY = (("crc_flit_errors", "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L"),
          ("crc_data_errors", "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_L"),
          ("replay_errors", "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_L"),
          ("recovery_errors", "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_L"))


def _by_fields(nvml, handle, links: int) -> tuple[dict, int]:
    """The same values from one nvmlDeviceGetFieldValues call: scoped fields for every link, and the
    per-link legacy ids of links 0-5. Returns them and how many fields were asked."""
    asks, keys = [], []
    for link in range(links):
        for name, const in SCOPED:
            if hasattr(nvml, const):
                asks.append((getattr(nvml, const), link))
                keys.append((link, name))
        for name, prefix in LEGACY:
            if link < 6 and hasattr(nvml, f"{prefix}{link}"):
                asks.append(getattr(nvml, f"{prefix}{link}"))
                keys.append((link, name + " (legacy id)"))
    return dict(zip(keys, _fields(nvml, handle, asks))), len(asks)


# Field values that could stand for the probe's per-function queries: (label, field constant, the call and
# its arguments (constant names) whose value it should equal, how to read that call's result).
CANDIDATES = (
    ("ecc mode current", "NVML_FI_DEV_ECC_CURRENT", "nvmlDeviceGetEccMode", (), lambda v: v[0]),
    ("ecc mode pending", "NVML_FI_DEV_ECC_PENDING", "nvmlDeviceGetEccMode", (), lambda v: v[1]),
    ("ecc corrected volatile", "NVML_FI_DEV_ECC_SBE_VOL_TOTAL", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC"), int),
    ("ecc uncorrected volatile", "NVML_FI_DEV_ECC_DBE_VOL_TOTAL", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"), int),
    ("ecc corrected aggregate", "NVML_FI_DEV_ECC_SBE_AGG_TOTAL", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC"), int),
    ("ecc uncorrected aggregate", "NVML_FI_DEV_ECC_DBE_AGG_TOTAL", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_AGGREGATE_ECC"), int),
    ("retired pending", "NVML_FI_DEV_RETIRED_PENDING", "nvmlDeviceGetRetiredPagesPendingStatus", (), int),
    ("shutdown limit", "NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT", "nvmlDeviceGetTemperatureThreshold",
     ("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",), int),
    ("slowdown limit", "NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT", "nvmlDeviceGetTemperatureThreshold",
     ("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",), int),
    ("memory max", "NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT", "nvmlDeviceGetTemperatureThreshold",
     ("NVML_TEMPERATURE_THRESHOLD_MEM_MAX",), int),
    ("gpu max", "NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT", "nvmlDeviceGetTemperatureThreshold",
     ("NVML_TEMPERATURE_THRESHOLD_GPU_MAX",), int),
    ("pcie replays", "NVML_FI_DEV_PCIE_REPLAY_COUNTER", "nvmlDeviceGetPcieReplayCounter", (), int),
    ("power instant mW", "NVML_FI_DEV_POWER_INSTANT", "nvmlDeviceGetPowerUsage", (), int),
    ("power average mW", "NVML_FI_DEV_POWER_AVERAGE", "nvmlDeviceGetPowerUsage", (), int),
    ("power current limit mW", "NVML_FI_DEV_POWER_CURRENT_LIMIT", "nvmlDeviceGetEnforcedPowerLimit", (), int),
    ("remapped correctable", "NVML_FI_DEV_REMAPPED_COR", "nvmlDeviceGetRemappedRows", (), lambda v: v[0]),
    ("remapped uncorrectable", "NVML_FI_DEV_REMAPPED_UNC", "nvmlDeviceGetRemappedRows", (), lambda v: v[1]),
    ("remap pending", "NVML_FI_DEV_REMAPPED_PENDING", "nvmlDeviceGetRemappedRows", (), lambda v: v[2]),
    ("remap failure", "NVML_FI_DEV_REMAPPED_FAILURE", "nvmlDeviceGetRemappedRows", (), lambda v: v[3]),
    ("memory temperature", "NVML_FI_DEV_MEMORY_TEMP", None, (), None),
    ("recovery action", "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None, (), None),
)


def _field_candidates(nvml, handle, runs: int) -> None:
    """Each candidate field beside the call it could replace: values, and the time of the call (median,
    warm session), of the field alone, and of all fields in one call."""
    present = [c for c in CANDIDATES if hasattr(nvml, c[1])]
    ids = [getattr(nvml, c[1]) for c in present]
    values = _fields(nvml, handle, ids)
    print(f"\nall {len(ids)} candidate fields in one nvmlDeviceGetFieldValues call: "
          f"{_ms(lambda: _fields(nvml, handle, ids), runs):.3f} ms median of {runs}")
    print("| value | field | field ms | call | call ms |\n|---|---|---|---|---|")
    for (label, _, fn, args, read), fid, value in zip(present, ids, values):
        field_ms = _ms(lambda: _fields(nvml, handle, [fid]), runs)
        call, call_ms = "–", ""
        if fn and hasattr(nvml, fn):
            consts = [getattr(nvml, a) for a in args]
            try:
                call = read(getattr(nvml, fn)(handle, *consts))
                call_ms = f"{_ms(lambda: getattr(nvml, fn)(handle, *consts), runs):.3f}"
            except nvml.NVMLError as exc:
                call = f"error {exc.value}"
        print(f"| {label} | {value} | {field_ms:.3f} | {call} | {call_ms} |")


def _warm_and_threads(nvml, runs: int) -> None:
    """Per-function times with NVML already open (a warm session: the probe's own init is a reference
    count), and the same GPU probed by two threads at once against one after the other."""
    import threading

    nvml.nvmlInit()
    try:
        probe_gpus(nvml)
        counts: Counter = Counter()
        micros: Counter = Counter()
        for _ in range(runs):
            probe_gpus(Counting(nvml, counts, micros))
        print(f"\nwarm session (NVML held open): probe {_ms(lambda: probe_gpus(nvml), runs):.2f} ms median of "
              f"{runs}; per call, mean over {runs} probes:")
        print("| µs per call | function |\n|---|---|")
        for name, n in sorted(counts.items(), key=lambda kv: -micros[kv[0]] / kv[1]):
            print(f"| {micros[name] / n:.1f} | `{name}` |")

        def two_threads():
            threads = [threading.Thread(target=probe_gpus, args=(nvml,)) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        sequential = _ms(lambda: (probe_gpus(nvml), probe_gpus(nvml)), runs)
        print(f"\nsame GPU, warm: two probes one after the other {sequential:.2f} ms, "
              f"two threads at once {_ms(two_threads, runs):.2f} ms (medians of {runs})")
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        _field_candidates(nvml, handle, runs)
    finally:
        nvml.nvmlShutdown()


def live(runs: int) -> None:
    import subprocess

    import pynvml  # noqa: PLC0415 - loaded already here (the fake imports it): FRESH times its import

    for label, code in FRESH.items():
        print(f"{label}, a fresh interpreter: {_fresh_ms(code, 5)}")
    counts: Counter = Counter()
    micros: Counter = Counter()
    gpus = probe_gpus(Counting(pynvml, counts, micros))
    print(f"GPUs: {len(gpus)}: " + "; ".join(f"{g.name} {g.pci_bus_id} driver {g.driver_version} "
                                             f"lost={g.lost} error={g.error} field_errors={g.field_errors}"
                                             for g in gpus))

    def init_shutdown():
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    print(f"nvmlInit + nvmlShutdown: {_ms(init_shutdown, runs):.2f} ms median of {runs}")
    print(f"probe_gpus (init, every query, shutdown): {_ms(lambda: probe_gpus(pynvml), runs):.2f} ms median of {runs}")
    smi = shutil.which("nvidia-smi")
    if smi:
        run = lambda: subprocess.run([smi, "-q"], capture_output=True, timeout=60)  # noqa: E731
        print(f"nvidia-smi -q (one process): {_ms(run, 5):.1f} ms median of 5")
    total = sum(counts.values())
    print(f"\none probe: {total} NVML calls, {sum(micros.values()) / 1000:.2f} ms inside them\n")
    print("| calls | µs total | µs per call | function |\n|---|---|---|---|")
    for name, n in counts.most_common():
        print(f"| {n} | {micros[name]:.0f} | {micros[name] / n:.1f} | `{name}` |")
    pynvml.nvmlInit()
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            calls = _by_call(pynvml, handle)
            links = max([k[0] for k in calls] + [0]) + 1
            fields, asked = _by_fields(pynvml, handle, max(links, 18))
            t_calls = _ms(lambda: _by_call(pynvml, handle), runs)
            t_fields = _ms(lambda: _by_fields(pynvml, handle, max(links, 18)), runs)
            print(f"\nGPU {index}: NVLink by call {t_calls:.2f} ms ({len(calls)} values), by one field values "
                  f"call {t_fields:.2f} ms ({asked} fields), medians of {runs}")
            print("| link | value | by call | by field |\n|---|---|---|---|")
            for key in sorted(set(calls) | set(fields), key=lambda k: (k[0], k[1])):
                print(f"| {key[0]} | {key[1]} | {calls.get(key, '–')} | {fields.get(key, '–')} |")
    finally:
        pynvml.nvmlShutdown()
    _warm_and_threads(pynvml, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--live", action="store_true",
                        help="on a machine with an NVIDIA driver: the real pynvml, each function timed, and the "
                             "NVLink counters read both ways (one call per value, one field values call)")
    args = parser.parse_args()
    if args.live:
        live(args.runs)
        return
    counts: Counter = Counter()
    gpus = probe_gpus(Counting(FakeNvml(h100_node(args.gpus)), counts))
    assert len(gpus) == args.gpus and not any(g.lost for g in gpus)
    times = []
    for _ in range(args.runs):
        fake = FakeNvml(h100_node(args.gpus))
        start = time.perf_counter()
        probe_gpus(fake)
        times.append((time.perf_counter() - start) * 1000)
    total = sum(counts.values())
    print(f"{args.gpus} GPUs (H100 SXM, 18 NVLinks each): {total} NVML calls, {total / args.gpus:.0f} per GPU; "
          f"Python around them over the fake: {statistics.median(times):.1f} ms median of {args.runs}\n")
    print("| calls | function |\n|---|---|")
    for name, n in counts.most_common():
        print(f"| {n} | `{name}` |")


if __name__ == "__main__":
    main()
