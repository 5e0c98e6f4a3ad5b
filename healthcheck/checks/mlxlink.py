"""HCA ports as ``mlxlink -m -c -e`` sees them: bit error rates, FEC, the cable module's temperature.

What sysfs cannot say: the pre-FEC (raw) and post-FEC (effective / symbol) bit error rates of the
physical link, which FEC the link runs, and the optical module's temperature against its own alarm
range. Thresholds (data, per class overridable):

- effective / symbol BER: FAIL above 1e-12, the BER class an InfiniBand link is specified to
  (ibdiagnet's BER test used 10^-12 as its default threshold); WARN above 1e-14. A healthy HDR/NDR
  link shows mlxlink's "15E-255" (no error since the last clear).
- raw (pre-FEC) BER: WARN above 1e-5, about 1.5 decades under the ~2.4e-4 pre-FEC BER that the RS(544,514)
  FEC of PAM4 links (HDR, NDR, 200/400GbE) can still correct; no FAIL by default (what the FEC cannot
  correct shows in the effective BER).
- FEC: a PAM4 speed (HDR, NDR, XDR, 200G, 400G, 800G) running "No FEC" FAILs: such a link cannot meet
  its BER without it.
- module temperature: FAIL at or above the module's own high alarm bound (printed as ``[low..high]``),
  else ``module_temp_fail_c`` (75 C, the top of the range NVIDIA's optics print); WARN within
  ``module_temp_margin_warn_c`` (5 C) of it.
- mlxlink's own troubleshooting: a non-zero status opcode with a recommendation WARNs with its words.
"""
from __future__ import annotations

from ..core.expectations import Expectations
from ..core.model import Finding, MlxlinkPort, Snapshot, Status
from .registry import check, finding, skip

THRESHOLDS = {"effective_ber_warn": 1e-14, "effective_ber_fail": 1e-12, "raw_ber_warn": 1e-5,
              "raw_ber_fail": None, "module_temp_fail_c": 75.0, "module_temp_margin_warn_c": 5.0,
              "no_fec_fail_speeds": ["HDR", "NDR", "XDR", "200G", "400G", "800G"]}
_HEALTHY_ADVICE = ("no issue was observed", "n/a", "")


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _no_fec(port: MlxlinkPort) -> bool:
    return (port.fec or "").strip().lower().replace("_", " ") in ("no fec", "none", "off", "disabled")


def _pam4(port: MlxlinkPort, speeds) -> bool:
    speed = (port.speed or "").upper()
    return any(s.upper() in speed for s in speeds or ())


def _judge(port: MlxlinkPort, t: dict) -> tuple[Status, list[str]]:
    status, notes = Status.PASS, []

    def worse(new: Status, note: str) -> None:
        nonlocal status
        if new.severity > status.severity:
            status = new
        notes.append(note)

    post = port.symbol_ber if port.symbol_ber is not None else port.effective_ber
    which = "symbol BER" if port.symbol_ber is not None else "effective BER"
    warn, fail = _num(t.get("effective_ber_warn")), _num(t.get("effective_ber_fail"))
    if post is not None:
        if fail is not None and post > fail:
            worse(Status.FAIL, f"{which} {post:.1e} above {fail:.0e}: errors left after FEC (cable, "
                               "transceiver or switch port)")
        elif warn is not None and post > warn:
            worse(Status.WARN, f"{which} {post:.1e} above {warn:.0e}")
    raw_warn, raw_fail = _num(t.get("raw_ber_warn")), _num(t.get("raw_ber_fail"))
    if port.raw_ber is not None:
        if raw_fail is not None and port.raw_ber > raw_fail:
            worse(Status.FAIL, f"raw BER {port.raw_ber:.1e} above {raw_fail:.0e}")
        elif raw_warn is not None and port.raw_ber > raw_warn:
            worse(Status.WARN, f"raw (pre-FEC) BER {port.raw_ber:.1e} above {raw_warn:.0e}: the FEC is "
                               "correcting a marginal link")
    if _no_fec(port) and _pam4(port, t.get("no_fec_fail_speeds")):
        worse(Status.FAIL, f"{port.speed} link running without FEC ({port.fec})")
    temp = port.module_temperature_c
    if temp is not None:
        limit = port.module_temp_high_c if port.module_temp_high_c is not None else _num(t.get("module_temp_fail_c"))
        margin = _num(t.get("module_temp_margin_warn_c"))
        source = "its alarm bound" if port.module_temp_high_c is not None else "the default limit"
        if limit is not None and temp >= limit:
            worse(Status.FAIL, f"module at {temp:g} C, at or above {source} {limit:g} C (airflow, a failing "
                               "transceiver)")
        elif limit is not None and margin is not None and temp >= limit - margin:
            worse(Status.WARN, f"module at {temp:g} C, within {margin:g} C of {source} {limit:g} C")
    advice = (port.recommendation or "").strip()
    if port.status_opcode not in (None, 0) and advice.lower() not in _HEALTHY_ADVICE:
        worse(Status.WARN, f"mlxlink: status opcode {port.status_opcode}: {advice}")
    return status, notes


@check("ib.mlxlink", needs=("mlxlink",), thresholds=THRESHOLDS, fails_by_default=True,
       fails_on="an HCA port's post-FEC (effective/symbol) BER above 1e-12, a PAM4 link (HDR/NDR/200G/400G) "
                "without FEC, or a cable module at or above its own high temperature alarm (75 C when none)")
def ib_mlxlink(snap: Snapshot, exp: Expectations, t: dict) -> list[Finding]:
    """HCA ports' bit error rates, FEC and cable-module temperature, as ``mlxlink -m -c -e`` reports.

    FAIL: effective (or symbol) BER above ``effective_ber_fail`` (1e-12); a PAM4 speed (HDR, NDR, XDR,
    200G/400G/800G Ethernet) running without FEC; a module at or above its own high temperature alarm
    bound (else ``module_temp_fail_c``, 75 C). WARN: effective BER above 1e-14, raw (pre-FEC) BER above
    1e-5, a module within 5 C of its limit, mlxlink's own recommendation when its status opcode is not
    0. ERROR: mlxlink failed for the port. A port that is not Active is left to ib.port.state.
    HealthCheckProgram, check and burn-in only (mlxlink takes seconds per port)."""
    name = "ib.mlxlink"
    if not snap.mlxlink:
        return skip(name, "no HCA port read by mlxlink")
    out = []
    for port in snap.mlxlink:
        if port.error:
            out.append(finding(name, Status.ERROR, port.error, port.component))
            continue
        metrics = {"effective_ber": port.effective_ber, "symbol_ber": port.symbol_ber, "raw_ber": port.raw_ber,
                   "module_temperature_c": port.module_temperature_c, "link_down": port.link_down,
                   "link_error_recovery": port.link_error_recovery}
        if (port.state or "").strip().lower() not in ("active", "up"):
            out.append(finding(name, Status.SKIP, f"port {port.state or '?'} (judged by ib.port.state)",
                               port.component))
            continue
        status, notes = _judge(port, t)
        link = " ".join(v for v in (port.speed, port.width, f"FEC {port.fec}" if port.fec else None) if v)
        message = "; ".join(notes) if notes else f"{link or 'link'}: BER and module within limits"
        out.append(finding(name, status, message, port.component, **metrics))
    return out
