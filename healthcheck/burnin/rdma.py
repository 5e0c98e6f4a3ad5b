"""The RDMA pair phase of the burn-in: perftest between pairs of nodes, rail by rail (HCA k of node A to
HCA k of node B), in parallel rounds that cover every node, with the pair scheduling and elimination of
bad-node localisation (:func:`healthcheck.burnin.localize.localise`, one run per rail and test).

I/O lives in the *runner* (``PairRunner``: one pair's server and client command lines in, their two
outputs out). The default, :class:`SubprocPairRunner`, starts the server on its node through the
launcher (``srun --overlap -N1 -n1 -w NODE``), then the client with the server's host name, both
through the one subprocess seam under the pair's deadline; a client refused because the server was not
listening yet is retried. Tests inject a runner that returns recorded outputs.

Entry point: :func:`run_rdma_phase` -> :class:`RdmaPhaseResult` (``to_dict()``, ``findings()``). Settings
come from ``healthcheck/data/rdma_pairs.toml`` and a site's ``[burnin.rdma]`` through :func:`validate`.
Optionally the port error counters are sampled before and after the rounds (``counter_sampler``) and
judged with :mod:`healthcheck.fabric.counters`: a port whose counters grew during the phase is named.
"""
from __future__ import annotations

import math
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Callable, Mapping, Sequence

from ..parsers.perftest import PerftestResult, parse_perftest
from .judge_rdma import Attribution, PairRun, attribute, expected_gbps, findings, pair_value
from .localize import Localisation, localise

BW_TESTS = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
LAT_TESTS = ("ib_write_lat", "ib_read_lat", "ib_send_lat")
MAX_PORT = 65535


class RdmaSettingsError(ValueError):
    """A [burnin.rdma] value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class RdmaSettings:
    bw_tests: tuple[str, ...] = ("ib_write_bw",)
    latency_test: str = "ib_write_lat"
    line_rate_gbps: float = 400.0
    efficiency: float = 0.90
    latency_us: float = 5.0
    margin: float = 0.02
    max_rounds: int = 6
    duration_s: int = 10
    message_bytes: int = 1 << 20
    qps: int = 4
    bidirectional: bool = False
    base_port: int = 18515
    timeout_s: float = 120.0
    server_start_s: float = 2.0
    connect_retries: int = 3
    launcher: tuple[str, ...] = ("srun", "--overlap", "-N1", "-n1", "-w", "{node}")

    @property
    def threshold_gbps(self) -> float:
        return self.efficiency * expected_gbps(self.line_rate_gbps, self.bidirectional)

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _positive(key: str, value: object, low: float, high: float, integer: bool = False) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high or (integer and int(value) != value):
        kind = "an integer" if integer else "a number"
        raise RdmaSettingsError(f"[burnin.rdma] {key}: expected {kind} in [{low:g}, {high:g}], got {value!r}")
    return int(value) if integer else float(value)


def validate(section: dict, base: RdmaSettings | None = None) -> RdmaSettings:
    """A ``[burnin.rdma]`` section over ``base`` (default: the packaged defaults); unknown keys and bad
    values are errors naming the key."""
    base = base or defaults()
    if not isinstance(section, dict):
        raise RdmaSettingsError(f"[burnin.rdma]: expected a table, got {type(section).__name__}")
    known = set(RdmaSettings.__dataclass_fields__)
    unknown = set(section) - known
    if unknown:
        raise RdmaSettingsError(f"[burnin.rdma]: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                                f"(known: {', '.join(sorted(known))})")
    v: dict = {}
    for key, value in section.items():
        if key == "bw_tests":
            if not isinstance(value, list) or not value or any(t not in BW_TESTS for t in value):
                raise RdmaSettingsError(f"[burnin.rdma] bw_tests: expected a non-empty list of "
                                        f"{', '.join(BW_TESTS)}, got {value!r}")
            v[key] = tuple(dict.fromkeys(value))
        elif key == "latency_test":
            if value not in LAT_TESTS + ("",):
                raise RdmaSettingsError(f"[burnin.rdma] latency_test: expected one of {', '.join(LAT_TESTS)} "
                                        f"or \"\" (none), got {value!r}")
            v[key] = value
        elif key == "launcher":
            if not isinstance(value, list) or not value or not all(isinstance(a, str) and a for a in value) \
                    or not any("{node}" in a for a in value):
                raise RdmaSettingsError("[burnin.rdma] launcher: expected a list of arguments naming {node} "
                                        f"(it would not know where to run), got {value!r}")
            v[key] = tuple(value)
        elif key == "bidirectional":
            if not isinstance(value, bool):
                raise RdmaSettingsError(f"[burnin.rdma] bidirectional: expected true or false, got {value!r}")
            v[key] = value
        else:
            limits = {"line_rate_gbps": (1, 10_000, False), "efficiency": (0.01, 1.0, False),
                      "latency_us": (0.01, 1e6, False), "margin": (0, 0.5, False), "max_rounds": (1, 50, True),
                      "duration_s": (1, 3600, True), "message_bytes": (2, 1 << 30, True), "qps": (1, 1024, True),
                      "base_port": (1024, MAX_PORT, True), "timeout_s": (1, 86400, False),
                      "server_start_s": (0, 600, False), "connect_retries": (0, 100, True)}[key]
            v[key] = _positive(key, value, *limits)
    return replace(base, **v)


_DEFAULTS: RdmaSettings | None = None


def defaults() -> RdmaSettings:
    """The packaged defaults (``healthcheck/data/rdma_pairs.toml``), validated like a site's section."""
    global _DEFAULTS
    if _DEFAULTS is None:
        doc = tomllib.loads(resources.files("healthcheck.data").joinpath("rdma_pairs.toml").read_text())
        _DEFAULTS = validate(doc.get("rdma", {}), RdmaSettings())
    return _DEFAULTS


# ------------------------------------------------------------------------------------------ commands

@dataclass(frozen=True)
class PairCommand:
    rail: int
    device: str
    test: str
    server: str
    client: str
    port: int
    server_argv: list[str]
    client_argv: list[str]
    timeout_s: float


def perftest_args(test: str, device: str, port: int, s: RdmaSettings) -> list[str]:
    """The perftest arguments both sides share (the client adds the server's host)."""
    args = [test, "-d", device, "-F", "-p", str(port)]
    if test in BW_TESTS:
        args += ["--report_gbits", "-D", str(s.duration_s), "-s", str(s.message_bytes), "-q", str(s.qps)]
        if s.bidirectional:
            args.append("-b")
    else:
        args += ["-s", "2", "-n", "1000"]
    return args


def launch(launcher: Sequence[str], node: str, argv: list[str]) -> list[str]:
    return [a.replace("{node}", node) for a in launcher] + argv


def pair_command(rail: int, device: str, test: str, server: str, client: str, port: int,
                 s: RdmaSettings) -> PairCommand:
    if not 1 <= port <= MAX_PORT:
        raise ValueError(f"TCP port {port} out of range: lower base_port or run fewer pairs at once")
    args = perftest_args(test, device, port, s)
    return PairCommand(rail, device, test, server, client, port, launch(s.launcher, server, args),
                       launch(s.launcher, client, args + [server]), s.timeout_s)


@dataclass
class PairOutput:
    server_text: str = ""
    client_text: str = ""
    error: str | None = None     # the runner's own failure (tool absent, deadline passed)
    duration_s: float = 0.0


PairRunner = Callable[[PairCommand], PairOutput]


class SubprocPairRunner:
    """Server first, then the client (retried while the server is not listening yet), both through
    :func:`healthcheck.safeio.subproc.run` under the pair's deadline, in the job-step environment."""

    def __init__(self, server_start_s: float = 2.0, connect_retries: int = 3, env: dict[str, str] | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.server_start_s, self.connect_retries, self.env, self.sleep = server_start_s, connect_retries, env, sleep

    def __call__(self, cmd: PairCommand) -> PairOutput:
        from ..safeio import subproc

        env = self.env if self.env is not None else subproc.job_env()
        start = time.monotonic()
        deadline = start + cmd.timeout_s
        box: dict[str, object] = {}

        def serve() -> None:
            try:
                box["server"] = subproc.run(cmd.server_argv, timeout=cmd.timeout_s, env=env, deadline=deadline)
            except (OSError, ValueError) as exc:
                box["server_error"] = str(exc)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        self.sleep(self.server_start_s)
        out = PairOutput()
        for attempt in range(self.connect_retries + 1):
            if "server_error" in box:
                break
            try:
                res = subproc.run(cmd.client_argv, timeout=max(deadline - time.monotonic(), 0.001), env=env,
                                  deadline=deadline)
            except (OSError, ValueError) as exc:
                out.error = f"client: {exc}"
                break
            out.client_text = res.stdout + ("\n" + res.stderr if res.stderr else "")
            if res.timed_out:
                out.error = f"client: no result within {cmd.timeout_s:g} s (killed)"
            if "Couldn't connect" not in out.client_text or attempt == self.connect_retries \
                    or time.monotonic() + self.server_start_s >= deadline:
                break
            self.sleep(self.server_start_s)
        thread.join(max(deadline - time.monotonic(), 0) + 1.0)
        server = box.get("server")
        if server is not None:
            out.server_text = server.stdout + ("\n" + server.stderr if server.stderr else "")
            if server.timed_out and out.error is None and not out.client_text:
                out.error = f"server: no result within {cmd.timeout_s:g} s (killed)"
        elif "server_error" in box:
            out.error = f"server: {box['server_error']}"
        out.duration_s = time.monotonic() - start
        return out


# ------------------------------------------------------------------------------------------ the phase

@dataclass
class RailResult:
    rail: int
    device: str
    bandwidth: dict[str, Localisation] = field(default_factory=dict)   # per bw test
    latency: Localisation | None = None

    def to_dict(self) -> dict:
        return {"rail": self.rail, "device": self.device,
                "bandwidth": {t: loc.to_dict() for t, loc in self.bandwidth.items()},
                "latency": self.latency.to_dict() if self.latency else None}


@dataclass
class RdmaPhaseResult:
    nodes: list[str]
    devices: list[str]
    settings: RdmaSettings
    rails: list[RailResult] = field(default_factory=list)
    pairs: list[PairRun] = field(default_factory=list)
    attributions: list[Attribution] = field(default_factory=list)
    counters: object | None = None          # healthcheck.fabric.counters.CounterReport
    skipped: str | None = None

    @property
    def status(self) -> str:
        statuses = {a.status for a in self.attributions}
        if self.counters is not None:
            statuses.add(self.counters.status)
        return "skip" if self.skipped else "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"

    def findings(self) -> list:
        out = findings(self.attributions, self.pairs, bool(self.pairs), self.skipped)
        if self.counters is not None:
            out += self.counters.findings()
        return out

    def to_dict(self) -> dict:
        return {"status": self.status, "skipped": self.skipped, "nodes": list(self.nodes),
                "devices": list(self.devices), "settings": self.settings.to_dict(),
                "threshold_gbps": round(self.settings.threshold_gbps, 3),
                "rails": [r.to_dict() for r in self.rails], "pairs": [p.to_dict() for p in self.pairs],
                "attributions": [a.to_dict() for a in self.attributions],
                "counters": self.counters.to_dict() if self.counters is not None else None}


class _RailRun:
    """The measure callback of one localise run: one round = every group of one rail at once."""

    def __init__(self, rail: int, device: str, test: str, s: RdmaSettings, runner: PairRunner, port0: int,
                 pairs: list[PairRun], lock: threading.Lock, max_parallel: int):
        self.rail, self.device, self.test, self.s, self.runner = rail, device, test, s, runner
        self.port0, self.pairs, self.lock, self.max_parallel = port0, pairs, lock, max_parallel
        self.round = 0

    def one(self, server: str, client: str, port: int) -> PairRun:
        cmd = pair_command(self.rail, self.device, self.test, server, client, port, self.s)
        run = PairRun(self.rail, self.device, self.test, server, client, port, self.round,
                      server_argv=list(cmd.server_argv), client_argv=list(cmd.client_argv))
        try:
            out = self.runner(cmd)
        except Exception as exc:  # noqa: BLE001 - a runner's failure is the pair's, never the phase's
            run.error = f"runner failed: {type(exc).__name__}: {exc}"
            return run
        sides: list[PerftestResult | None] = []
        for text in (out.client_text, out.server_text):
            sides.append(parse_perftest(text) if text and text.strip() else None)
        run.value, run.error, run.warnings = pair_value(*sides)
        if out.error:
            run.error = out.error if run.value is None else f"{out.error} (after a result)"
        run.duration_s = out.duration_s
        return run

    def group(self, group: tuple[str, ...], index: int) -> tuple[float | None, list[PairRun]]:
        """A pair, or a triple as two pairs run one after the other (the slowest counts)."""
        runs = [self.one(group[i], group[i + 1], self.port0 + index) for i in range(len(group) - 1)]
        values = [r.value for r in runs]
        if any(v is None for v in values):
            return None, runs
        if self.test in LAT_TESTS:  # a score: reference / measured, >= 1 passes
            worst = max(values)
            return (self.s.latency_us / worst if worst > 0 else None), runs
        return min(values), runs

    def __call__(self, groups: list[tuple[str, ...]]) -> dict[tuple[str, ...], float | None]:
        self.round += 1
        out: dict[tuple[str, ...], float | None] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_parallel, len(groups)))) as pool:
            futures = {g: pool.submit(self.group, g, i) for i, g in enumerate(groups)}
            for g, fut in futures.items():
                value, runs = fut.result()
                out[g] = value
                with self.lock:
                    self.pairs.extend(runs)
        return out


def run_rdma_phase(nodes: Sequence[str], devices: Sequence[str], settings: RdmaSettings | None = None,
                   runner: PairRunner | None = None, *, known_good: Sequence[str] = (), seed: int = 0,
                   peers: Mapping[tuple[str, str], str] | None = None, max_parallel: int = 64,
                   counter_sampler: Callable[[], list] | None = None,
                   counter_settings: object | None = None) -> RdmaPhaseResult:
    """Pairs of ``nodes`` on every rail (``devices[k]`` is rail k's HCA on every node), each bandwidth
    test then the latency test, each localised; the low pairs attributed to a node, an HCA/link or a
    path (:func:`healthcheck.burnin.judge_rdma.attribute`). ``known_good`` nodes (inside or outside
    ``nodes``) are partners of choice for the repair rounds. ``peers``: (node, device) -> the switch
    port at the other end, for the messages. ``counter_sampler``: returns
    :class:`healthcheck.fabric.counters.Sample` lists (each with the time it was taken); called before
    and after the rounds, the growth judged with ``counter_settings`` (default: the packaged thresholds).

    Never raises for a failed run (a failed pair is data); ValueError for bad arguments."""
    s = settings or defaults()
    nodes, devices = list(nodes), list(devices)
    if not devices or len(set(devices)) != len(devices) or not all(isinstance(d, str) and d for d in devices):
        raise ValueError(f"devices: expected distinct HCA names (one per rail), got {devices!r}")
    if any(not isinstance(n, str) or not n or n.startswith("-") for n in nodes + list(known_good)):
        raise ValueError("node names must be non-empty and must not start with '-'")
    if any(d.startswith("-") for d in devices):
        raise ValueError("HCA names must not start with '-'")
    result = RdmaPhaseResult(nodes, devices, s)
    if len(nodes) + len([g for g in known_good if g not in nodes]) < 2:
        result.skipped = "fewer than two nodes: no pair to test"
        return result
    runner = runner or SubprocPairRunner(s.server_start_s, s.connect_retries)
    before = counter_sampler() if counter_sampler else None
    tests = list(s.bw_tests) + ([s.latency_test] if s.latency_test else [])
    stride = len(nodes) // 2 + 2
    lock = threading.Lock()
    rails = result.rails = [RailResult(k, d) for k, d in enumerate(devices)]
    for t_index, test in enumerate(tests):
        lat = test in LAT_TESTS
        threshold, unit = (1.0, "x of the latency reference") if lat else (s.threshold_gbps, "Gb/s")

        def one_rail(rail: RailResult) -> Localisation:
            port0 = s.base_port + rail.rail * stride
            if port0 + stride > MAX_PORT:
                raise ValueError(f"base_port {s.base_port}: {len(devices)} rails x {stride} ports pass {MAX_PORT}")
            measure = _RailRun(rail.rail, rail.device, test, s, runner, port0, result.pairs, lock, max_parallel)
            return localise(nodes, measure, threshold, known_good=known_good, margin=s.margin,
                            max_rounds=s.max_rounds, seed=seed + t_index, unit=unit)

        with ThreadPoolExecutor(max_workers=len(rails)) as pool:  # rails at once: distinct HCAs and ports
            locs = list(pool.map(one_rail, rails))
        for rail, loc in zip(rails, locs):
            if lat:
                rail.latency = loc
            else:
                rail.bandwidth[test] = loc
    result.pairs.sort(key=lambda p: (tests.index(p.test), p.rail, p.round, p.server, p.client))
    by_rail = {r.rail: r.device for r in rails}
    for test in s.bw_tests:
        result.attributions += attribute(by_rail, {r.rail: r.bandwidth[test] for r in rails}, None,
                                         [p for p in result.pairs if p.test == test], peers,
                                         s.threshold_gbps, s.margin)
    if s.latency_test:
        result.attributions += attribute(by_rail, {}, {r.rail: r.latency for r in rails},
                                         [p for p in result.pairs if p.test == s.latency_test], peers,
                                         s.threshold_gbps, s.margin)
    if counter_sampler is not None:
        from ..fabric.counters import judge_window

        def far_end(key):
            return (peers or {}).get((key.node, key.hca))

        result.counters = judge_window(before or [], counter_sampler(), counter_settings, far_end)
    return result
