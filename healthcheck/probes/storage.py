"""Storage devices and their SMART health: NVMe controllers (``/sys/class/nvme``) and SCSI/SATA disks
(``/sys/block/sd*``) listed from sysfs, each read by ``nvme smart-log -o json`` (NVMe, when nvme-cli is
installed) or ``smartctl -j -a`` through the subprocess seam, every call inside one deadline.

A tool that is not installed leaves the device listed with ``unread`` saying so (storage.health SKIPs
it; storage.count still counts it); a tool that fails or runs past its deadline leaves ``unread``
with its words (storage.health reports ERROR for that device).
"""
from __future__ import annotations

import os
import re
import time

from ..core.model import StorageDevice

TOOL_TIMEOUT_S = 10.0  # one call; an NVMe answers in milliseconds, a spun-down disk in seconds
MAX_TOOL_OUTPUT = 4 * 1024 * 1024
MAX_DEVICES = 256
_NVME = re.compile(r"nvme[0-9]{1,4}")
_SD = re.compile(r"sd[a-z]{1,4}")


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def _natural(name: str) -> tuple:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1, len(name), name)


def list_devices(sys_root: str = "/sys") -> list[StorageDevice]:
    """NVMe controllers and sd* disks (removable ones left out: a USB stick is not the node's storage)."""
    devices: list[StorageDevice] = []
    nvme_dir = os.path.join(sys_root, "class", "nvme")
    for name in sorted(os.listdir(nvme_dir), key=_natural) if os.path.isdir(nvme_dir) else []:
        if not _NVME.fullmatch(name):
            continue
        base = os.path.join(nvme_dir, name)
        devices.append(StorageDevice(name=name, kind="nvme", model=_read(os.path.join(base, "model")),
                                     serial=_read(os.path.join(base, "serial")),
                                     state=_read(os.path.join(base, "state"))))
    block = os.path.join(sys_root, "block")
    for name in sorted(os.listdir(block), key=_natural) if os.path.isdir(block) else []:
        if not _SD.fullmatch(name) or _read(os.path.join(block, name, "removable")) == "1":
            continue
        model = " ".join(filter(None, (_read(os.path.join(block, name, "device", "vendor")),
                                       _read(os.path.join(block, name, "device", "model"))))) or None
        devices.append(StorageDevice(name=name, kind="sata", model=model))
    return devices[:MAX_DEVICES]


def commands(dev: StorageDevice, dev_root: str = "/dev", which=None) -> list[tuple[str, list[str]]]:
    """(bundle file name, argv) of the tools installed for ``dev``, preferred first."""
    from ..safeio import subproc

    which = which or subproc.which
    path = os.path.join(dev_root, dev.name)
    out = []
    if dev.kind == "nvme" and which("nvme"):
        out.append((f"nvme-smart-log-{dev.name}.json", ["nvme", "smart-log", path, "-o", "json"]))
    if which("smartctl"):
        out.append((f"smartctl-{dev.name}.json", ["smartctl", "-j", "-a", path]))
    return out


def _absent_tools(dev: StorageDevice) -> str:
    return ("health not read: nvme-cli (nvme) and smartmontools (smartctl) are not installed"
            if dev.kind == "nvme" else "health not read: smartmontools (smartctl) is not installed")


def read_outputs(dev: StorageDevice, deadline: float, dev_root: str = "/dev", run=None, which=None,
                 every_tool: bool = False) -> tuple[dict[str, str], str | None]:
    """Run the health tools of ``dev`` (the first that answers, or ``every_tool``): (file name -> output,
    what went wrong on the way, or None)."""
    from ..safeio import subproc

    run = run or subproc.run
    outputs: dict[str, str] = {}
    problems: list[str] = []
    cmds = commands(dev, dev_root, which)
    if not cmds:
        return outputs, _absent_tools(dev)
    for name, argv in cmds:
        timeout = min(TOOL_TIMEOUT_S, deadline - time.monotonic())
        if timeout <= 0:
            problems.append(f"{' '.join(argv[:2])}: not run, the storage deadline had passed")
            break
        try:
            res = run(argv, timeout=timeout, deadline=deadline, max_output=MAX_TOOL_OUTPUT)
        except OSError as exc:
            problems.append(f"{' '.join(argv[:2])}: {exc}")
            continue
        label = " ".join(argv[:2]) if argv[0] == "nvme" else "smartctl"
        if res.timed_out:
            problems.append(f"{label} {dev.name}: no answer within {timeout:.3g} s")
        elif res.truncated:
            problems.append(f"{label} {dev.name}: output over {MAX_TOOL_OUTPUT} bytes")
        elif res.stdout.strip() and (res.returncode == 0 or argv[0] == "smartctl"):
            # smartctl's exit status is a bit mask (a failing disk sets bit 3): its JSON is read anyway
            outputs[name] = res.stdout
            if not every_tool:
                break
        else:
            said = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[0][:200]
            problems.append(f"{label} {dev.name}: {said}")
    return outputs, "; ".join(problems) or (None if outputs else "no output")


def judge_outputs(dev: StorageDevice, outputs: dict[str, str], why: str | None) -> StorageDevice:
    """``dev`` (from sysfs) with the health its tool outputs give; ``unread`` when none parses."""
    from ..parsers import ParseError
    from ..parsers.smart import merge, parse_storage_health

    readings = [dev]
    problems = [why] if why else []
    for name, text in outputs.items():
        try:
            readings.append(parse_storage_health(text, dev.name))
        except ParseError as exc:
            problems.append(f"{name}: {exc}")
    problems += [r.unread for r in readings[1:] if r.unread]
    merged = merge(readings)
    merged.name, merged.kind = dev.name, dev.kind
    if merged.source is None:
        merged.unread = "; ".join(p for p in problems if p) or "health not read"
    return merged


def probe_storage(sys_root: str = "/sys", dev_root: str = "/dev", deadline_s: float = 10.0,
                  run=None, which=None) -> list[StorageDevice]:
    """Every device listed, with its health read by one tool; all calls end within ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    out = []
    for dev in list_devices(sys_root):
        outputs, why = read_outputs(dev, deadline, dev_root, run, which)
        out.append(judge_outputs(dev, outputs, why))
    return out


# ------------------------------------------------------------------------------------ bundles

LISTING = "storage-devices.json"  # the devices sysfs listed when the bundle was collected
_FILE = re.compile(r"(nvme-smart-log|smartctl)-([A-Za-z0-9_]{1,32})\.(json|txt)")


def listing_text(devices: list[StorageDevice]) -> str:
    """The bundle's device list: what sysfs showed, and why a device's health was not recorded."""
    import json

    keys = ("name", "kind", "model", "serial", "state", "unread")
    return json.dumps([{k: getattr(d, k) for k in keys if getattr(d, k) is not None} for d in devices], indent=1)


def storage_from_bundle(names: list[str], text_of) -> list[StorageDevice] | None:
    """A bundle's storage recordings (``names``: its top-level file names; ``text_of(name)``: a file's
    text) -> devices; None when the bundle recorded no storage at all."""
    import json

    by_device: dict[str, dict[str, str]] = {}
    for name in sorted(names):
        m = _FILE.fullmatch(name)
        if m:
            by_device.setdefault(m.group(2), {})[name] = text_of(name) or ""
    listed: dict[str, StorageDevice] = {}
    raw = text_of(LISTING) if LISTING in names else None
    if raw is not None:
        data = json.loads(raw)
        if not isinstance(data, list):
            raise ValueError(f"{LISTING} must hold a list of devices")
        for entry in data[:MAX_DEVICES]:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ValueError(f"{LISTING}: each device must be an object with a name")
            listed[entry["name"]] = StorageDevice(
                name=entry["name"][:64], kind=str(entry.get("kind") or "nvme")[:16],
                **{k: str(entry[k])[:200] for k in ("model", "serial", "state", "unread")
                   if isinstance(entry.get(k), str)})
    if raw is None and not by_device:
        return None
    for name in by_device:
        if name not in listed:
            listed[name] = StorageDevice(name=name, kind="nvme" if name.startswith("nvme") else "sata")
    out = []
    for name in sorted(listed, key=_natural):
        dev = listed[name]
        outputs = by_device.get(name, {})
        out.append(judge_outputs(dev, outputs, None if outputs else dev.unread or "no health recorded"))
    return out
