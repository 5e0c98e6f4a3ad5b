"""GPU telemetry sampled through NVML while the burn-in loads the GPUs.

:class:`Sampler` is a context manager: it opens its own NVML session (``nvmlInit`` on entry,
``nvmlShutdown`` on exit; NVML counts sessions, so the caller's own stays valid with the real
library) and runs a daemon thread that every ``period_s`` reads, per GPU index:

- temperature (``nvmlDeviceGetTemperature``, NVML_TEMPERATURE_GPU, C),
- power (``nvmlDeviceGetPowerUsage``, mW -> W),
- SM clock (``nvmlDeviceGetClockInfo``, NVML_CLOCK_SM, MHz),
- active clock event (throttle) reasons (``nvmlDeviceGetCurrentClocksEventReasons``, or the older
  ``...ThrottleReasons``), decoded to the canonical names of ``healthcheck.core.model.THROTTLE_REASONS``
  by :func:`healthcheck.probes.nvml.clock_event_reasons`, as the NVML probe does.

NVML fails in many ways: a call that raises (any NVMLError: NotSupported, Unknown, GPU lost, ...), a
function the installed pynvml lacks, or anything else, degrades that field of that sample to None
and never kills the thread. Failures other than "not supported / no permission / not in this
pynvml" are kept, counted, in the summary's ``errors``. :meth:`Sampler.summary` condenses the
samples per GPU into a :class:`TelemetrySummary`; :meth:`Sampler.sample_once` takes one sample in
the caller's thread (the thread runs exactly that).
"""
from __future__ import annotations

import math
import statistics
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from healthcheck.probes.nvml import clock_event_reasons

_QUIET = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_NO_PERMISSION")
_REASON_CALLS = (("nvmlDeviceGetCurrentClocksEventReasons", "nvmlClocksEventReason"),
                 ("nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlClocksThrottleReason"))


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not finite")
    return number


@dataclass
class Sample:
    temp_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    reasons: list[str] | None = None  # None: not read


@dataclass
class TelemetrySummary:
    index: int
    samples: int = 0
    temp_max_c: float | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    sm_clock_min_mhz: float | None = None
    sm_clock_median_mhz: float | None = None
    # reason -> fraction (0..1] of the samples that read reasons in which it was active
    reasons: dict[str, float] = field(default_factory=dict)
    reason_samples: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def component(self) -> str:
        return f"gpu{self.index}"


def summarize(index: int, samples: list[Sample], errors: dict[str, int] | None = None) -> TelemetrySummary:
    """Pure: the summary of one GPU's samples."""
    def values(attr: str) -> list[float]:
        return [v for s in samples if (v := getattr(s, attr)) is not None]

    temps, powers, clocks = values("temp_c"), values("power_w"), values("sm_clock_mhz")
    read = [s.reasons for s in samples if s.reasons is not None]
    counts: dict[str, int] = {}
    for reasons in read:
        for name in set(reasons):
            counts[name] = counts.get(name, 0) + 1
    return TelemetrySummary(
        index=index, samples=len(samples),
        temp_max_c=max(temps) if temps else None,
        power_mean_w=statistics.fmean(powers) if powers else None,
        power_max_w=max(powers) if powers else None,
        sm_clock_min_mhz=min(clocks) if clocks else None,
        sm_clock_median_mhz=statistics.median(clocks) if clocks else None,
        reasons={name: counts[name] / len(read) for name in sorted(counts)},
        reason_samples=len(read),
        errors=[msg if n == 1 else f"{msg} (x{n})" for msg, n in (errors or {}).items()],
    )


class Sampler:
    def __init__(self, nvml: Any = None, indices: list[int] | None = None, period_s: float = 0.5) -> None:
        if not period_s > 0:
            raise ValueError(f"telemetry period_s must be > 0, got {period_s!r}")
        self.nvml = nvml
        self._discover = indices is None  # None: every GPU NVML counts, found on start
        self.indices = list(indices or [])
        self.period_s = period_s
        self._samples: dict[int, list[Sample]] = {i: [] for i in self.indices}
        self._errors: dict[int, dict[str, int]] = {i: {} for i in self.indices}
        self._handles: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._open = False
        self._quiet: set[Any] = self._quiet_codes()

    def _quiet_codes(self) -> set[Any]:
        return {getattr(self.nvml, n) for n in _QUIET if hasattr(self.nvml, n)} if self.nvml is not None else set()

    # --------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> "Sampler":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Open NVML and start the thread; when NVML cannot open, every GPU records the error."""
        if self.nvml is None:
            try:
                import pynvml  # noqa: PLC0415 - lazy on purpose
            except ImportError as exc:
                self._note_all(f"pynvml not importable: {exc}")
                return
            self.nvml = pynvml
        self._quiet = self._quiet_codes()
        try:
            self.nvml.nvmlInit()
        except Exception as exc:
            self._note_all(f"nvmlInit: {exc}")
            return
        self._open = True
        if self._discover:
            count = self._call(-1, "nvmlDeviceGetCount")
            self.indices = list(range(int(count or 0)))
            with self._lock:
                for i in self.indices:
                    self._samples.setdefault(i, [])
                    self._errors.setdefault(i, {})
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="burnin-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 4 * self.period_s))
            self._thread = None
        if self._open:
            self._open = False
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass

    def _loop(self) -> None:
        while True:
            self.sample_once()
            if self._stop.wait(self.period_s):
                return

    # ---------------------------------------------------------------------------------- sampling
    def _note(self, index: int, message: str) -> None:
        with self._lock:
            errors = self._errors.setdefault(index, {})
            errors[message] = errors.get(message, 0) + 1

    def _note_all(self, message: str) -> None:
        for index in self.indices:
            self._note(index, message)

    def _call(self, index: int, fn: str, *args: Any, convert: Callable[[Any], Any] | None = None) -> Any:
        """``nvml.<fn>(*args)`` (converted), or None when it fails in any way (failure noted)."""
        try:
            value = getattr(self.nvml, fn)(*args)
        except AttributeError:
            return None  # this pynvml lacks the function
        except Exception as exc:  # NVMLError or anything else: the field is None for this sample
            if getattr(exc, "value", None) not in self._quiet:
                self._note(index, f"{fn}: {exc}")
            return None
        if convert is None or value is None:
            return value
        try:
            return convert(value)
        except Exception as exc:  # a value of an unexpected type
            self._note(index, f"{fn}: unexpected value {value!r:.40} ({type(exc).__name__})")
            return None

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            handle = self._call(index, "nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                return None
            self._handles[index] = handle
        return self._handles[index]

    def _reasons(self, index: int, handle: Any) -> list[str] | None:
        for fn, prefix in _REASON_CALLS:
            if hasattr(self.nvml, fn):
                return self._call(index, fn, handle,
                                  convert=lambda mask: clock_event_reasons(self.nvml, int(mask), prefix))
        return None

    def _sample(self, index: int) -> Sample:
        handle = self._handle(index)
        if handle is None:
            return Sample()
        nvml = self.nvml
        return Sample(
            temp_c=self._call(index, "nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0),
                              convert=_finite),
            power_w=self._call(index, "nvmlDeviceGetPowerUsage", handle, convert=lambda mw: _finite(mw) / 1000.0),
            sm_clock_mhz=self._call(index, "nvmlDeviceGetClockInfo", handle, getattr(nvml, "NVML_CLOCK_SM", 1),
                                    convert=_finite),
            reasons=self._reasons(index, handle),
        )

    def sample_once(self) -> None:
        """One sample of every GPU (what the thread does each period)."""
        for index in self.indices:
            try:
                sample = self._sample(index)
            except Exception as exc:  # a conversion of a strange value: never kill the thread
                self._note(index, f"sample: {type(exc).__name__}: {exc}")
                sample = Sample()
            with self._lock:
                self._samples.setdefault(index, []).append(sample)

    def summary(self) -> dict[int, TelemetrySummary]:
        with self._lock:
            return {i: summarize(i, list(self._samples.get(i, [])), dict(self._errors.get(i, {})))
                    for i in self.indices}
