"""GPU activity while the model trains, sampled by each node's first rank: DCGM's profiling field 1002
(``DCGM_FI_PROF_SM_ACTIVE``: the fraction of time at least one warp was resident on an SM, averaged
over the SMs) through ``dcgmi dmon`` where dcgmi answers, else NVML's utilisation (the fraction of time
a kernel was running: a coarser figure, 100 % with one busy SM). The result says which one it is
(``source``): the judge names it, never mixes the two.

``parse_dmon`` is pure; the sampler runs ``dcgmi`` through the subprocess seam (a deadline per
sample) or reads NVML, on a daemon thread."""
from __future__ import annotations

import re
import threading
from typing import Any

SM_ACTIVE_FIELD = 1002
_ROW = re.compile(r"^\s*GPU\s+(\d+)\s+(\S+)\s*$")


def parse_dmon(text: str) -> dict[int, float]:
    """``dcgmi dmon -e 1002 -c 1`` output -> {GPU index: SM activity in percent}; rows whose value is
    not a number (``N/A``: the profiling module is not loaded or another client holds it) are left out."""
    out: dict[int, float] = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        try:
            value = float(m.group(2))
        except ValueError:
            continue
        if 0.0 <= value <= 1.0:
            out[int(m.group(1))] = round(100.0 * value, 3)
    return out


class Sampler:
    """Samples every ``period_s`` until ``stop()``; ``result()`` -> {"source", "samples": {index: [pct]},
    "notes"}. ``nvml`` (the pynvml module or a fake) and ``dcgmi`` (a path, or None to look it up) are seams."""

    def __init__(self, indices: list[int], period_s: float = 0.5, nvml: Any = None, dcgmi: str | None = "dcgmi"):
        self.indices, self.period_s = list(indices), period_s
        self.samples: dict[int, list[float]] = {i: [] for i in self.indices}
        self.notes: list[str] = []
        self.source = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="train-activity", daemon=True)
        self._nvml, self._dcgmi = nvml, dcgmi

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def result(self) -> dict[str, Any]:
        return {"source": self.source or "none", "samples": {str(k): v for k, v in self.samples.items()},
                "notes": self.notes}

    def _dcgm_once(self, exe: str) -> dict[int, float]:
        from ...safeio import subproc

        res = subproc.run([exe, "dmon", "-e", str(SM_ACTIVE_FIELD), "-c", "1"], timeout=10.0)
        return parse_dmon(res.stdout) if res.ok else {}

    def _loop(self) -> None:
        from ...safeio import subproc

        exe = subproc.which(self._dcgmi) if self._dcgmi else None
        if exe is not None and self._dcgm_once(exe):
            self.source = "dcgm_sm_active"
            read = lambda: self._dcgm_once(exe)  # noqa: E731
        else:
            if exe is not None:
                self.notes.append("dcgmi gave no SM activity (profiling module not loaded?): NVML utilisation used")
            try:
                nvml = self._nvml
                if nvml is None:
                    import pynvml as nvml
                nvml.nvmlInit()
                handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
            except Exception as exc:  # noqa: BLE001 - no driver: nothing sampled, the judge says so
                self.notes.append(f"NVML unavailable: {type(exc).__name__}: {exc}"[:200])
                return
            self.source = "nvml_utilization"
            read = lambda: {i: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu) for i, h in handles.items()}  # noqa: E731
        while not self._stop.wait(self.period_s):
            try:
                for i, value in read().items():
                    if i in self.samples:
                        self.samples[i].append(value)
            except Exception as exc:  # noqa: BLE001 - a failed sample costs that sample
                note = f"sample failed: {type(exc).__name__}: {exc}"[:200]
                if note not in self.notes:
                    self.notes.append(note)
