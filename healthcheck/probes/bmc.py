"""The BMC through ``ipmitool`` (in-band, /dev/ipmi0): ``sel elist`` (the System Event Log) and
``sdr elist`` (sensors), through the subprocess seam under one deadline of their own (BMCs are slow:
an ``sel elist`` of a full log takes seconds to tens of seconds).

No ipmitool, or no BMC device node, gives ``BmcInfo.unavailable`` with the reason (the checks SKIP
with it); a call that fails or runs past the deadline gives ``sel_error``/``sdr_error`` (ERROR).
"""
from __future__ import annotations

import os
import time

from ..core.model import BmcInfo

DEVICE_NODES = ("ipmi0", "ipmi/0", "ipmidev/0")  # where ipmitool's open interface looks
MAX_TOOL_OUTPUT = 8 * 1024 * 1024
SEL_SHARE = 0.7  # of the deadline for `sel elist`; `sdr elist` gets what is left
FILES = {"sel": "ipmitool-sel.txt", "sdr": "ipmitool-sdr.txt"}
ARGV = {"sel": ["ipmitool", "sel", "elist"], "sdr": ["ipmitool", "sdr", "elist"]}
_NO_DEVICE = ("could not open device", "no such file or directory", "unable to open")


def unavailable_reason(dev_root: str = "/dev", which=None) -> str | None:
    """Why the BMC cannot be asked here (no tool, no device node), or None."""
    from ..safeio import subproc

    if (which or subproc.which)("ipmitool") is None:
        return "ipmitool is not installed: the BMC was not read"
    if not any(os.path.exists(os.path.join(dev_root, node)) for node in DEVICE_NODES):
        return (f"no BMC device ({os.path.join(dev_root, 'ipmi0')} absent: no BMC, or the ipmi_si and "
                "ipmi_devintf modules are not loaded)")
    return None


def read_bmc(deadline_s: float = 20.0, dev_root: str = "/dev", run=None, which=None) -> tuple[BmcInfo, dict[str, str]]:
    """(what the BMC said, raw outputs by bundle file name)."""
    from ..safeio import subproc
    from ..parsers import ParseError
    from ..parsers.ipmitool import parse_sdr, parse_sel

    start = time.monotonic()
    end = start + deadline_s
    info = BmcInfo()
    raw: dict[str, str] = {}
    why = unavailable_reason(dev_root, which)
    if why:
        info.unavailable = why
        return info, raw
    run = run or subproc.run
    for part, parse in (("sel", parse_sel), ("sdr", parse_sdr)):
        stop = start + deadline_s * SEL_SHARE if part == "sel" else end
        timeout = stop - time.monotonic()
        label = " ".join(ARGV[part])
        if timeout <= 0:
            setattr(info, f"{part}_error", f"{label}: not run, the BMC deadline had passed")
            continue
        try:
            res = run(ARGV[part], timeout=timeout, deadline=end, max_output=MAX_TOOL_OUTPUT)
        except OSError as exc:
            setattr(info, f"{part}_error", f"{label}: {exc}")
            continue
        said = (res.stderr.strip().splitlines() or [""])[0][:200]
        if res.timed_out:
            setattr(info, f"{part}_error", f"{label}: no answer within {timeout:.3g} s (BMC slow or hung)")
            continue
        if res.returncode != 0 and any(word in said.lower() for word in _NO_DEVICE):
            info.unavailable = f"no BMC answered ({label}: {said})"
            return BmcInfo(unavailable=info.unavailable), raw
        if res.truncated or res.returncode != 0:
            setattr(info, f"{part}_error", f"{label}: {said or f'exit status {res.returncode}'}")
            continue
        raw[FILES[part]] = res.stdout
        try:
            setattr(info, "events" if part == "sel" else "sensors", parse(res.stdout))
        except ParseError as exc:
            setattr(info, f"{part}_error", f"{label}: {exc}")
    return info, raw


def probe_bmc(deadline_s: float = 20.0, dev_root: str = "/dev", run=None, which=None) -> BmcInfo:
    return read_bmc(deadline_s, dev_root, run, which)[0]


def bmc_from_files(sel_text: str | None, sdr_text: str | None, unavailable: str | None = None) -> BmcInfo | None:
    """A bundle's recordings -> BmcInfo (None when neither was recorded and no reason was noted)."""
    from ..parsers import ParseError
    from ..parsers.ipmitool import parse_sdr, parse_sel

    if sel_text is None and sdr_text is None:
        return BmcInfo(unavailable=unavailable) if unavailable else None
    info = BmcInfo()
    for part, text, parse in (("sel", sel_text, parse_sel), ("sdr", sdr_text, parse_sdr)):
        if text is None:  # not recorded: that check SKIPs
            continue
        try:
            setattr(info, "events" if part == "sel" else "sensors", parse(text))
        except ParseError as exc:
            setattr(info, f"{part}_error", f"{FILES[part]}: {exc}")
    return info


def bmc_from_bundle(names: list[str], text_of, meta: dict) -> BmcInfo | None:
    """A bundle's ``ipmitool-sel.txt``/``ipmitool-sdr.txt`` (and the reason ``collect`` noted in
    meta.json's ``bmc_unavailable`` when there was no BMC to read) -> BmcInfo, None when neither."""
    reason = meta.get("bmc_unavailable") if isinstance(meta, dict) else None
    return bmc_from_files(text_of(FILES["sel"]) if FILES["sel"] in names else None,
                          text_of(FILES["sdr"]) if FILES["sdr"] in names else None,
                          str(reason)[:300] if reason else None)
