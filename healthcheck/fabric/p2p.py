"""Judge ``nvbandwidth`` matrices: each GPU pair (and host/GPU pair) against the SKU's reference and
against the node's own median, one slow pair named with its GPUs and its NVLink/NVSwitch path.

Input: :class:`healthcheck.parsers.nvbandwidth.NvbResult`, the references
(``healthcheck/data/p2p_references.toml`` or a site file of the same shape: :func:`load_references`),
optionally the node topology (:mod:`healthcheck.fabric.nodetopo`) to say which path a slow pair takes.

Per test case (check ``fabric.node.p2p``, component = the test name or the pair):

- waived -> SKIP; error / cut before its matrix -> ERROR (the measurement is missing, not slow);
- a latency test (unit other than GB/s) -> SKIP (not judged here);
- a pair below ``value * (1 + lower)`` of the SKU reference -> FAIL; above ``value * (1 + upper)`` -> WARN
  (suspicious: the test probably measured something else);
- a pair below ``(1 - median_tolerance)`` of the node's median for that test -> FAIL, whatever the
  reference (a node is as fast as its slowest pair for collective traffic);
- when every slow pair shares one GPU (and there are at least two), one more FAIL names that GPU;
- otherwise one PASS with the pair count, minimum and median.

The diagonal of a GPU x GPU matrix (0.00 or N/A: a GPU is not its own peer) is never judged. Pure:
the only I/O is :func:`default_references_text` reading the packaged TOML.
"""
from __future__ import annotations

import re
import statistics
import tomllib
from dataclasses import dataclass, field

from healthcheck.core.model import Finding, Status
from healthcheck.parsers.nvbandwidth import NvbResult, NvbTest, pairs

CHECK = "fabric.node.p2p"
DEFAULT_MEDIAN_TOLERANCE = 0.15
MAX_LISTED = 16  # slow pairs listed one by one per test; the rest summed up in one finding
_ENTRY_KEYS = {"value", "lower", "upper", "unit", "peak", "source", "estimate"}
_ARROW = re.compile(r"\(row\)\s{0,4}(<->|<-|->)")


class P2pReferencesError(ValueError):
    """The references file is malformed; the message names the SKU and key."""


@dataclass(frozen=True)
class P2pRef:
    value: float
    lower: float
    upper: float
    unit: str
    source: str
    peak: float | None = None
    estimate: bool = True


@dataclass
class P2pSku:
    name: str
    match: list[str]
    description: str = ""
    tests: dict[str, P2pRef] = field(default_factory=dict)


@dataclass
class P2pReferences:
    skus: list[P2pSku] = field(default_factory=list)

    def sku_for(self, gpu_name: str | None) -> P2pSku | None:
        """The first SKU one of whose ``match`` substrings is in ``gpu_name`` (case-insensitive)."""
        if not gpu_name:
            return None
        low = gpu_name.lower()
        return next((s for s in self.skus if any(m.lower() in low for m in s.match)), None)

    def by_name(self, name: str) -> P2pSku | None:
        return next((s for s in self.skus if s.name == name), None)


def default_references_text() -> str:
    from importlib import resources

    return resources.files("healthcheck").joinpath("data/p2p_references.toml").read_text(encoding="utf-8")


def _number(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise P2pReferencesError(f"{where}: expected a number, not {value!r}")
    return float(value)


def _entry(where: str, data: object) -> P2pRef:
    if not isinstance(data, dict):
        raise P2pReferencesError(f"{where}: must be a table {{ value = ..., lower = ..., source = ... }}")
    unknown = set(data) - _ENTRY_KEYS
    if unknown:
        raise P2pReferencesError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("value", "source"):
        if key not in data:
            raise P2pReferencesError(f"{where}: missing {key!r} (every reference says where it comes from)")
    value = _number(f"{where}.value", data["value"])
    lower = _number(f"{where}.lower", data.get("lower", -0.15))
    upper = _number(f"{where}.upper", data.get("upper", 0.25))
    if value <= 0 or not -1.0 < lower <= 0.0 or upper < 0.0:
        raise P2pReferencesError(f"{where}: need value > 0, -1 < lower <= 0, upper >= 0 "
                                 f"(got {value:g}, {lower:g}, {upper:g})")
    if not isinstance(data["source"], str) or not data["source"].strip():
        raise P2pReferencesError(f"{where}.source: a non-empty text")
    estimate = data.get("estimate", True)
    if not isinstance(estimate, bool):
        raise P2pReferencesError(f"{where}.estimate: true or false, not {estimate!r}")
    peak = data.get("peak")
    return P2pRef(value, lower, upper, str(data.get("unit", "GB/s")), data["source"].strip(),
                  _number(f"{where}.peak", peak) if peak is not None else None, estimate)


def _skus(text: str, where: str) -> dict[str, P2pSku]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise P2pReferencesError(f"{where}: not valid TOML ({exc})") from None
    unknown = set(data) - {"sku"}
    if unknown:
        raise P2pReferencesError(f"{where}: unknown table(s) {', '.join(sorted(unknown))} (only [sku.NAME])")
    out = {}
    for name, table in (data.get("sku") or {}).items():
        if not isinstance(table, dict):
            raise P2pReferencesError(f"{where}: sku.{name} must be a table")
        match = table.get("match", [])
        if not isinstance(match, list) or not all(isinstance(m, str) and m.strip() for m in match):
            raise P2pReferencesError(f"{where}: sku.{name}.match must be a list of GPU name substrings")
        description = table.get("description", "")
        tests = {key: _entry(f"{where}: sku.{name}.{key}", value)
                 for key, value in table.items() if key not in ("match", "description")}
        out[name] = P2pSku(name, list(match), str(description), tests)
    return out


def load_references(text: str | None = None, override: str | None = None,
                    where: str = "p2p references") -> P2pReferences:
    """The packaged references (or ``text``), then ``override`` (a site file's text): its SKUs replace
    the packaged ones key by key; new SKUs come first (a site's own match wins)."""
    base = _skus(default_references_text() if text is None else text, where)
    if override is not None:
        extra = _skus(override, f"{where} (override)")
        for name, sku in extra.items():
            if name in base:
                merged = base.pop(name)
                merged.tests.update(sku.tests)
                merged.match = sku.match or merged.match
                merged.description = sku.description or merged.description
                extra[name] = merged
        return P2pReferences(list(extra.values()) + list(base.values()))
    return P2pReferences(list(base.values()))


def _label(kind: str | None, index: int, processes: dict | None = None) -> str:
    """"GPU3"; in a multi-node run a rank is named by its host and local GPU ("gb-r01-t02:GPU1")."""
    if processes and (kind or "GPU") == "GPU" and index in processes:
        host, device, _ = processes[index]
        return f"{host}:GPU{device}"
    return f"{kind or 'GPU'}{index}"


def _subject(test: NvbTest, row: int, column: int, processes: dict | None = None) -> tuple[str, str]:
    """("GPU3 <- GPU5", component "GPU3-GPU5") for a pair of the matrix."""
    arrow = _ARROW.search(test.description or "")
    a, b = _label(test.row_kind, row, processes), _label(test.column_kind, column, processes)
    component = "-".join(sorted({a, b})) if test.row_kind == test.column_kind else \
        (b if (test.column_kind or "GPU") == "GPU" else a)
    return f"{a} {arrow.group(1) if arrow else '/'} {b}", component


def _path(test: NvbTest, row: int, column: int, topology) -> str:
    if topology is None:
        return ""
    if test.row_kind == "GPU" and test.column_kind == "GPU":
        return "; path " + topology.path(row, column)
    gpu = column if test.column_kind == "GPU" else row if test.row_kind == "GPU" else None
    place = topology.gpus.get(gpu) if gpu is not None else None
    if place is not None and place.numa is not None:
        return f"; GPU{gpu} on NUMA node {place.numa}"
    return ""


def judge_test(test: NvbTest, sku: P2pSku | None, topology=None,
               median_tolerance: float = DEFAULT_MEDIAN_TOLERANCE, gpu_name: str | None = None,
               processes: dict | None = None) -> list[Finding]:
    """The findings of one test case (see the module notes); ``processes`` (a multi-node run's rank ->
    host, local GPU) names each rank by its host and GPU, and a tray in every slow pair is named."""
    if test.status == "waived":
        return [Finding(CHECK, Status.SKIP, f"{test.name}: waived by nvbandwidth"
                        + (f" ({test.message})" if test.message else ""), test.name)]
    if test.status != "passed":
        return [Finding(CHECK, Status.ERROR, f"{test.name}: no result ({test.status}"
                        + (f": {test.message}" if test.message else "") + ")", test.name)]
    if (test.unit or "GB/s") != "GB/s":
        return [Finding(CHECK, Status.SKIP, f"{test.name}: measured in {test.unit}, not judged here", test.name)]
    values = pairs(test)
    if not values:
        return [Finding(CHECK, Status.ERROR, f"{test.name}: the matrix holds no measured pair", test.name)]
    median = statistics.median(v for _, _, v in values)
    ref = sku.tests.get(test.name) if sku else None
    floor = ref.value * (1 + ref.lower) if ref else None
    ceiling = ref.value * (1 + ref.upper) if ref else None
    kind = ("own estimate" if ref.estimate else "published") if ref else ""
    slow: list[tuple[int, int, float, str]] = []
    out: list[Finding] = []
    for row, column, value in values:
        reasons = []
        if floor is not None and value < floor:
            reasons.append(f"below the {sku.name} reference {ref.value:g} GB/s{ref.lower:+.0%} ({kind})")
        if median > 0 and value < median * (1 - median_tolerance):
            reasons.append(f"{value / median:.0%} of the {'run' if processes else 'node'}'s median {median:.1f} GB/s")
        if reasons:
            slow.append((row, column, value, "; ".join(reasons)))
        elif ceiling is not None and value > ceiling:
            subject, component = _subject(test, row, column, processes)
            out.append(Finding(CHECK, Status.WARN, f"{test.name}: {subject} {value:.1f} GB/s is above the "
                               f"{sku.name} reference {ref.value:g}{ref.upper:+.0%} (suspicious: check "
                               "what was measured)", component, {"gbps": value}))
    for row, column, value, why in slow[:MAX_LISTED]:
        subject, component = _subject(test, row, column, processes)
        metrics = {"gbps": value, "median_gbps": median}
        if ref:
            metrics["reference_gbps"] = ref.value
        out.append(Finding(CHECK, Status.FAIL, f"{test.name}: {subject} {value:.1f} GB/s, {why}"
                           + _path(test, row, column, topology), component, metrics))
    if len(slow) > MAX_LISTED:
        out.append(Finding(CHECK, Status.FAIL, f"{test.name}: {len(slow) - MAX_LISTED} more slow pair(s) "
                           "not listed", test.name))
    if len(slow) >= 2:
        ends = [{_label(test.row_kind, r, processes), _label(test.column_kind, c, processes)}
                for r, c, _, _ in slow]
        common = sorted(set.intersection(*ends) - {"CPU0"})
        if len(common) == 1 and (common[0].startswith("GPU") or ":GPU" in common[0]):
            out.append(Finding(CHECK, Status.FAIL, f"{test.name}: {common[0]} is in all {len(slow)} slow "
                               f"pairs: suspect {common[0]} (its NVLinks or its NVSwitch ports), not the "
                               "peers", common[0]))
        elif processes:
            out.extend(_tray(test, slow, processes))
    if not slow:
        low = min(v for _, _, v in values)
        against = f"reference {ref.value:g} GB/s{ref.lower:+.0%} ({kind})" if ref else \
            f"no {sku.name} reference for this test" if sku else \
            f"no reference for {gpu_name or 'this GPU'}: judged against the node's median only"
        out.append(Finding(CHECK, Status.PASS, f"{test.name}: {len(values)} pairs, min {low:.1f}, median "
                           f"{median:.1f} GB/s ({against})", test.name, {"min_gbps": low, "median_gbps": median}))
    return out


def _tray(test: NvbTest, slow: list, processes: dict) -> list[Finding]:
    """A multi-node run whose slow pairs all touch one host, through more than one of its GPUs: the tray
    (its NVLink cabling or its place in the rack), not one GPU nor the rest of the domain."""
    def host(index: int) -> str | None:
        return processes[index][0] if index in processes else None

    hosts = [{host(r), host(c)} - {None} for r, c, _, _ in slow]
    common = sorted(set.intersection(*hosts)) if hosts and all(hosts) else []
    if len(common) != 1 or len({host(r) for r in processes.keys()}) < 2:
        return []
    return [Finding(CHECK, Status.FAIL, f"{test.name}: every one of the {len(slow)} slow pairs has a GPU of "
                    f"{common[0]}: suspect that tray (its NVLink cartridges or cables), not the rest of the "
                    "domain", common[0])]


def gpu_name_of(result: NvbResult) -> str | None:
    """The GPU model nvbandwidth printed ("Device 0: NVIDIA H100 80GB HBM3 (00000000:1b:00)"; a multi-node
    run: "Process 0 (host): device 0: NVIDIA GB200 (00000008:01:00)")."""
    names = list(result.devices.values()) or [name for _, _, name in result.processes.values()]
    name = names[0] if names else None
    return name.split(" (")[0].strip() if name else None


def judge(result: NvbResult, refs: P2pReferences, *, sku: str | None = None, gpu_name: str | None = None,
          topology=None, median_tolerance: float = DEFAULT_MEDIAN_TOLERANCE) -> list[Finding]:
    """Every test case of ``result``; the SKU by name (``sku``), else from ``gpu_name`` or the GPU
    model nvbandwidth printed. An unknown ``sku`` name raises P2pReferencesError."""
    if not 0.0 < median_tolerance < 1.0:
        raise ValueError(f"median_tolerance must be in (0, 1), not {median_tolerance!r}")
    chosen = None
    if sku:
        chosen = refs.by_name(sku)
        if chosen is None:
            raise P2pReferencesError(f"unknown SKU {sku!r} (known: {', '.join(s.name for s in refs.skus)})")
    else:
        gpu_name = gpu_name or gpu_name_of(result)
        chosen = refs.sku_for(gpu_name)
    out: list[Finding] = []
    for test in result.tests:
        out.extend(judge_test(test, chosen, None if result.processes else topology,  # one node's paths
                              median_tolerance, gpu_name, result.processes))
    return out
