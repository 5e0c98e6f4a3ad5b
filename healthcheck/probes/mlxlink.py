"""``mlxlink -d DEV [-p PORT] -m -c -e`` per HCA port (NVIDIA MFT), through the subprocess seam under
one deadline for all ports, the ports asked concurrently (a module read takes a second or more, and an
HGX node has eight HCAs). HealthCheckProgram, ``check``, ``collect`` and the burn-in only: the checks
that need it (``ib.mlxlink``) do not run in the prolog or epilog, so a hook never starts mlxlink.

No mlxlink installed: None (the source is absent, its check SKIPs saying so). A port whose call fails,
times out or prints something unparsable is an :class:`MlxlinkPort` with ``error`` set (ERROR).
"""
from __future__ import annotations

import threading
import time

from ..core.model import MlxlinkPort

MAX_TOOL_OUTPUT = 4 * 1024 * 1024
MAX_PARALLEL = 8


def bundle_name(device: str, port: int) -> str:
    """``mlxlink-mlx5_0.txt`` (port 1), ``mlxlink-mlx5_0-p2.txt``."""
    return f"mlxlink-{device}.txt" if port == 1 else f"mlxlink-{device}-p{port}.txt"


def argv(device: str, port: int) -> list[str]:
    return ["mlxlink", "-d", device] + (["-p", str(port)] if port != 1 else []) + ["-m", "-c", "-e"]


def ports_of(sysfs_root: str) -> list[tuple[str, int]]:
    """(RDMA device, port) pairs from ``class/infiniband`` (no counters read)."""
    from .infiniband import probe_ib_ports

    return [(p.device, p.port) for p in probe_ib_ports(sysfs_root, counters=False)]


def _safe_device(name: str) -> bool:
    return bool(name) and not name.startswith("-") and all(c.isalnum() or c in "_.:-" for c in name)


def read_mlxlink(sysfs_root: str = "/sys", deadline_s: float = 15.0, run=None, which=None
                 ) -> tuple[list[MlxlinkPort] | None, dict[str, str]]:
    """(every port's report, raw outputs by bundle file name); (None, {}) without mlxlink."""
    from ..safeio import subproc
    from ..parsers import ParseError
    from ..parsers.mlxlink import parse_mlxlink

    if (which or subproc.which)("mlxlink") is None:
        return None, {}
    run = run or subproc.run
    end = time.monotonic() + deadline_s
    targets = [(dev, port) for dev, port in ports_of(sysfs_root) if _safe_device(dev)]
    results: dict[tuple[str, int], MlxlinkPort] = {}
    raw: dict[str, str] = {}
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(MAX_PARALLEL)

    def one(dev: str, port: int) -> None:
        with slots:
            timeout = end - time.monotonic()
            label = " ".join(argv(dev, port))
            if timeout <= 0:
                result = MlxlinkPort(dev, port, error=f"{label}: not run, the mlxlink deadline had passed")
            else:
                try:
                    res = run(argv(dev, port), timeout=timeout, deadline=end, max_output=MAX_TOOL_OUTPUT)
                except OSError as exc:
                    res, result = None, MlxlinkPort(dev, port, error=f"{label}: {exc}")
                if res is not None:
                    result = _judge_output(dev, port, label, res, parse_mlxlink, ParseError)
                    if res.stdout:
                        with lock:
                            raw[bundle_name(dev, port)] = res.stdout
        with lock:
            results[(dev, port)] = result

    threads = [threading.Thread(target=one, args=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()) + 1.0)
    with lock:
        ports = [results.get(t) or MlxlinkPort(t[0], t[1], error="mlxlink: no answer within the deadline")
                 for t in targets]
        return ports, dict(raw)


def _judge_output(dev: str, port: int, label: str, res, parse, parse_error) -> MlxlinkPort:
    if res.timed_out:
        return MlxlinkPort(dev, port, error=f"{label}: no answer within the deadline")
    if not res.stdout.strip():
        why = (res.stderr or "").strip().splitlines()
        return MlxlinkPort(dev, port, error=f"{label}: exited {res.returncode}: {why[-1][:200] if why else 'no output'}")
    try:
        return parse(res.stdout, dev, port)
    except parse_error as exc:
        return MlxlinkPort(dev, port, error=f"{label}: {exc}")


def probe_mlxlink(sysfs_root: str = "/sys", deadline_s: float = 15.0, run=None, which=None
                  ) -> list[MlxlinkPort] | None:
    return read_mlxlink(sysfs_root, deadline_s, run, which)[0]


def mlxlink_from_bundle(names: list[str], read) -> list[MlxlinkPort] | None:
    """The ``mlxlink-<dev>[-p<port>].txt`` files of a bundle, parsed; None when it has none.
    ``read(name)`` gives a file's text."""
    from ..parsers import ParseError
    from ..parsers.mlxlink import parse_mlxlink

    ports = []
    for name in sorted(n for n in names if n.startswith("mlxlink-") and n.endswith(".txt")):
        stem = name[len("mlxlink-"):-len(".txt")]
        dev, port = stem, 1
        head, sep, tail = stem.rpartition("-p")
        if sep and tail.isdigit():
            dev, port = head, int(tail)
        text = read(name)
        try:
            ports.append(parse_mlxlink(text or "", dev, port))
        except ParseError as exc:
            ports.append(MlxlinkPort(dev, port, error=f"{name}: {exc}"))
    return ports or None
