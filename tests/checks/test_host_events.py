"""host.events: the host-event policy judging real kernel logs (corpus, read in place) and small
fixtures: every FAULT file of the host corpus fails (or warns, for corrected-only events), every
healthy/benign kernel log passes."""
from __future__ import annotations

import pytest

from healthcheck.checks.gpu_xid import event_key
from healthcheck.checks.host_events import host_events
from healthcheck.config import default_expectations
from healthcheck.policies.host_events import load_host_event_policy
from healthcheck.core.model import GpuInfo, HostInfo, Snapshot, Status, worst
from healthcheck.parsers.host_events import parse_host_events
from healthcheck.parsers.kernel_log import parse_kernel_log
from healthcheck.pipeline.judge import judge
from tests.conftest import CORPUS, corpus_params

FAIL, WARN, PASS = Status.FAIL, Status.WARN, Status.PASS

# Expected verdict of host.events per kernel-log file of the host corpus (SOURCES-host.tsv) and the
# classes that must appear in its FAIL/WARN findings.
EXPECTED = {
    "mce/blog-md-id44478718338__dmesg-fatal-mce-cpu14-bank0-processor-context-corrupt-panic-skylake-sp.txt":
        (FAIL, {"mce_fatal", "mce_uncorrected"}),
    "mce/mcelog-issue70__syslog-mce-bank4-events-logged-at-boot-j5005-with-mcelog-lines.txt":
        (FAIL, {"mce_uncorrected"}),
    "mce/rasdaemon-issue95__dmesg-grep-mce-amd-5950x-bank17-repeated-events-logged-excerpt.txt":
        (WARN, {"mce_corrected", "mce_logged"}),
    "edac/lkml-20210812-tony-luck__dmesg-einj-skx-mc3-ue-memory-read-error-ghes-memory-failure.txt":
        (FAIL, {"edac_ue", "mce_uncorrected", "ghes_uncorrected", "mce_uncorrected_memory"}),
    "edac/osm-operations-issue300__syslog-mc0-repeated-ce-error-cpu0-channel2-dimm0-excerpt.txt":
        (WARN, {"edac_ce"}),
    "edac/radiasoft-devops-issue134__syslog-sbridge-mc1-ce-memory-scrubbing-error-dimm.txt":
        (WARN, {"edac_ce", "mce_corrected"}),
    "aer/gpu-burn-issue1__dmesg-aer-corrected-dll-then-fatal-surprise-down-tesla-xid79-excerpt.txt":
        (FAIL, {"aer_fatal"}),
    "aer/minisforum-ms02-issue10__journal-aer-uncorrectable-nonfatal-acsviol-root-port-thunderbolt-xhci-recovery-failed-excerpt.txt":
        (FAIL, {"aer_nonfatal", "aer_recovery_failed"}),
    "aer/nbfc-issue181__journal-aer-corrected-physical-layer-receiver-error-laptop-root-port.txt":
        (WARN, {"aer_corrected"}),
    "storage/borg-issue2494__journal-ata-sda-read-errors-blk-update-request-io-error-unordered-timestamps-excerpt.txt":
        (FAIL, {"block_io_error"}),
    "storage/fcos-tracker-issue784__dmesg-xfs-vda4-metadata-corruption-detected-unmount-run-xfs-repair-excerpt.txt":
        (FAIL, {"xfs_error"}),
    "storage/lede-issue6147__dmesg-blk-update-critical-target-error-aborting-journal-ext4-remount-ro-sdb1-excerpt.txt":
        (FAIL, {"block_io_error", "fs_error", "fs_readonly"}),
    "storage/nvme-cli-issue151__dmesg-nvme2-nvme3-io-qid0-timeout-reset-removing-after-probe-failure-centos7.txt":
        (FAIL, {"nvme_controller"}),
    "storage/ubuntu-rockchip-issue155__kernlog-grep-nvme-controller-down-pci-status-read-failed-blk-update-io-error-removing-excerpt.txt":
        (FAIL, {"nvme_controller", "block_io_error"}),
    "mlx5/charm-issue2532__dmesg-mlx5-cmd-check-rtr2rts-qp-failed-bad-parameter-syndrome-excerpt.txt":
        (WARN, {"mlx5_cmd_failed"}),
    "mlx5/cubecos-issue733__journal-grep-eth-mlx5-eth1-link-up-repeated-flapping.txt":
        (FAIL, {"link_up_repeated"}),  # 3 repeats in 45 s: 3 strikes within 3 h
    "mlx5/qemu-devel-202503-vdpa__dmesg-cx6dx-health-compromised-firmware-internal-error-synd-0x1-multiple-pfs.txt":
        (FAIL, {"mlx5_health"}),
    "mlx5/tinycore-redpill-issue9__dmesg-grep-mlx5-cx4lx-handle-hca-cap-failed-probe-failed-error-22.txt":
        (FAIL, {"mlx5_init_failed"}),
    "benign/arm-nas-issue16__dmesg-grep-mlx5-cx5-enumeration-cable-plugged-sufficient-slot-power-excerpt.txt":
        (PASS, set()),
    "benign/asus-wmi-sensors-issue6__dmesg-threadripper-aer-enabled-with-irq-pme-dpc-error-containment-capabilities-excerpt.txt":
        (PASS, set()),
    "benign/bcachefs-issue91__dmesg-desktop-nvidia-drm-load-edac-amd64-dram-ecc-disabled-module-will-not-load-excerpt.txt":
        (PASS, set()),
    "benign/gpud-testdata-kmsg1__kmsg-raw-hgx-4-nvswitch-open-ipv6-addrconf-perf-interrupt-took-too-long.log":
        (PASS, set()),
}
# rasdaemon's ras-mc-ctl reports are not kernel logs: host.events does not read them (no events).
NOT_KERNEL_LOGS = {
    "mce/rasdaemon-issue121__ras-mc-ctl-summary-errors-error-count-amd-umc-cecc.txt",
    "edac/osm-operations-issue759__ras-mc-ctl-errors-ce-memory-read-error-cpu1-mc1-chan1-dimm0-excerpt.txt",
}


def _snap(text: str | bytes, taken_at: str = "", **kw) -> Snapshot:
    events = parse_kernel_log(text) + parse_host_events(text)
    return Snapshot(node="n1", taken_at=taken_at, source="bundle:test", kernel_events=events, **kw)


def _judge(snap: Snapshot):
    return host_events(snap, default_expectations(), {})


def _classes(findings, statuses=(FAIL, WARN)) -> set[str]:
    return {k[len("host_"):] for f in findings if f.status in statuses for k, v in f.metrics.items()
            if k.startswith("host_") and k != "host_events" and k != "host_events_acknowledged"}


@pytest.mark.parametrize("path", corpus_params("host", "*/*"))
def test_host_corpus_kernel_logs_judged_as_sources_say(path):
    rel = f"{path.parent.name}/{path.name}"
    if path.parent.name not in ("mce", "edac", "aer", "storage", "mlx5", "benign"):
        pytest.skip("not a kernel log (SMART/IPMI: judged by their own checks)")
    if rel in NOT_KERNEL_LOGS:
        assert parse_host_events(path.read_bytes()) == []
        return
    assert rel in EXPECTED, f"{rel}: a new corpus file; add its expected verdict"
    want, classes = EXPECTED[rel]
    findings = _judge(_snap(path.read_bytes()))
    assert worst(f.status for f in findings) is want, [f.message for f in findings]
    got = _classes(findings, (want,)) if want is not PASS else set()
    assert classes <= got, (classes - got, [f.message for f in findings])
    assert not any(f.status is FAIL for f in findings) or want is FAIL


@pytest.mark.parametrize("path", corpus_params("kernel-xid") + corpus_params("pcie", "dmesg*"))
def test_healthy_and_gpu_only_kernel_logs_raise_no_host_event(path):
    findings = _judge(_snap(path.read_bytes()))
    assert [f.status for f in findings] == [PASS], [f.message for f in findings]


def test_corpus_table_names_existing_files():
    if not (CORPUS / "host").is_dir():
        pytest.skip("corpus absent")
    for rel in list(EXPECTED) + list(NOT_KERNEL_LOGS):
        assert (CORPUS / "host" / rel).is_file(), rel


# ------------------------------------------------------------------------------- own fixtures

HEALTHY_BOOT = """\
[    0.000000] Linux version 6.8.0-45-generic
[    0.120000] mce: CPU0: Thermal monitoring enabled (TM1)
[    0.130000] MCE: In-kernel MCE decoding enabled.
[    0.140000] mce: CPU supports 32 MCE banks
[    1.500000] EDAC MC: Ver: 3.0.0
[    1.600000] EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0: DEV 0000:3a:0a.0 (INTERRUPT)
[    1.700000] pcieport 0000:00:01.0: AER: enabled with IRQ 24
[    1.710000] pcieport 0000:00:03.1: AER enabled with IRQ 31
[    1.720000] pcieport 0000:00:03.1: DPC: error containment capabilities: Int Msg #0, RPExt+ PoisonedTLP+ SwTrigger+ RP PIO Log 6, DL_ActiveErr+
[    5.000000] mlx5_core 0000:17:00.0: Port module event: module 0, Cable plugged
[    5.100000] mlx5_core 0000:17:00.0: mlx5_pcie_event:301:(pid 512): PCIe slot advertised sufficient power (75W).
[    6.000000] mlx5_core 0000:17:00.0 ens1f0np0: Link up
[    6.100000] EXT4-fs (nvme0n1p2): mounted filesystem 1234 ro with ordered data mode. Quota mode: none.
[    6.200000] XFS (md0): Mounting V5 Filesystem
[    7.000000] nvme nvme0: 64/0/0 default/read/poll queues
"""


def test_healthy_boot_lines_never_match():
    # only context classes (a module plugged, one Link up): nothing that can warn or fail
    assert {ev.event_class for ev in parse_host_events(HEALTHY_BOOT)} == {"module_plugged", "link_up_repeated"}
    assert [f.status for f in _judge(_snap(HEALTHY_BOOT))] == [PASS]


def test_edac_ce_warns_then_fails_past_the_higher_rate():
    line = "[{t}.000000] EDAC MC1: {n} CE memory read error on CPU_SrcID#0_MC#1_Chan#0_DIMM#0 (x)\n"
    few = "".join(line.format(t=100 + i, n=3) for i in range(3))  # 9 CEs
    many = "".join(line.format(t=100 + i, n=10) for i in range(10))  # 100 CEs
    (f,) = _judge(_snap(few))
    assert (f.status, f.component, f.metrics["host_edac_ce"]) == (WARN, "MC1", 9)
    (f,) = _judge(_snap(many))
    assert (f.status, f.metrics["host_edac_ce"]) == (FAIL, 100)


def test_window_judged_as_of_recording_time_else_newest_line():
    old = "2024-03-05T10:00:00+00:00 n1 kernel: EDAC MC0: 1 CE memory read error on DIMM_A1 (x)\n"
    new = "2024-03-06T09:00:00+00:00 n1 kernel: mlx5_core 0000:17:00.0 ib0: Link up\n"
    # no recording time: as of the newest line (23 h later): the CE is inside the 24 h window
    (f, _) = sorted(_judge(_snap(old + new)), key=lambda f: f.component)
    assert (f.component, f.status) == ("MC0", WARN)
    # recorded two days later: the CE has left the window
    findings = _judge(_snap(old + new, taken_at="2024-03-08T10:00:00+00:00"))
    assert all(f.status is PASS for f in findings)


def test_uptime_window_uses_host_uptime_or_newest_line():
    text = "[100.0] EDAC MC0: 1 CE error on DIMM (x)\n[90000.0] nvme nvme0: 8/0/0 default/read/poll queues\n"
    (f,) = _judge(_snap(text, host=HostInfo(uptime_s=100_000.0)))
    assert f.status is PASS and "below" in f.message  # 99,900 s old: outside 24 h
    (f,) = _judge(_snap(text))  # no host uptime: as of the newest event (the CE itself)
    assert f.status is WARN


def test_link_downs_are_strikes_in_three_hours_and_name_the_interface():
    lines = "".join(f"[{100 + 10 * i}.0] mlx5_core 0000:17:00.0 ib0: Link down\n"
                    f"[{105 + 10 * i}.0] mlx5_core 0000:17:00.0 ib0: Link up\n" for i in range(3))
    findings = _judge(_snap(lines))
    assert {(f.component, f.status) for f in findings} == {("ib0", FAIL)}
    two = "".join(f"[{100 + i}.0] igb 0000:02:00.0 eno1: igb: eno1 NIC Link is Down\n" for i in range(2))
    assert [f.status for f in _judge(_snap(two))] == [WARN]
    # three downs two hours apart: as of the newest, only two fall in the 3 h window
    spread = "".join(f"[{100 + 7200 * i}.0] mlx5_core 0000:17:00.0 ib0: Link down\n" for i in range(3))
    assert [f.status for f in _judge(_snap(spread))] == [WARN]
    # the IB core's own wording (Linux 6.14+) counts the same way
    core = "".join(f"[{100 + i}.0] mlx5_core 0000:17:00.0 mlx5_3: Port: 1 Link DOWN\n" for i in range(3))
    assert {(f.component, f.status) for f in _judge(_snap(core))} == {("mlx5_3", FAIL)}


def test_aer_fatal_names_the_port_and_the_gpu_behind_it():
    text = ("[10.0] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: 0000:00:02.0\n"
            "[10.0] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)\n"
            "[10.1] nvidia 0000:02:00.0: device has no AER-aware driver\n")
    (f,) = _judge(_snap(text))
    assert f.status is FAIL and f.component == "0000:00:02.0"
    assert "PCIe port (pcieport)" in f.message and "behind it: GPU 0000:02:00.0 (nvidia)" in f.message


def test_aer_on_a_gpu_is_that_gpus_component():
    text = "[10.0] nvidia 0000:07:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer\n"
    snap = _snap(text, gpus=[GpuInfo(index=3, pci_bus_id="00000000:07:00.0")])
    (f,) = _judge(snap)
    assert (f.status, f.component) == (FAIL, "gpu3")


def test_module_unplug_cleared_by_a_later_plug():
    unplug = "[5.0] mlx5_core 0000:17:00.0: Port module event: module 0, Cable unplugged\n"
    plug = "[9.0] mlx5_core 0000:17:00.0: Port module event: module 0, Cable plugged\n"
    assert [f.status for f in _judge(_snap(unplug + plug))] == [PASS]
    (f,) = _judge(_snap(plug + unplug))
    assert (f.status, f.component) == (FAIL, "0000:17:00.0 module 0")
    text = "[5.0] mlx5_core 0000:17:00.0: Port module event[error]: module 1, Cable error, High Temperature\n"
    assert [f.status for f in _judge(_snap(text))] == [FAIL]


def test_acknowledged_events_are_passed_over_new_ones_count():
    old = "[50.0] nvme nvme0: I/O 12 QID 0 timeout, reset controller\n"
    new = "[900.0] nvme nvme0: controller is down; will reset: CSTS=0xffffffff\n"
    snap = _snap(old)
    snap.boot_id = "boot-1"
    snap.acknowledged_events = [event_key(ev, "boot-1") for ev in snap.kernel_events]
    (f,) = _judge(snap)
    assert f.status is PASS and "1 already acted on" in f.message
    snap2 = _snap(old + new)
    snap2.boot_id, snap2.acknowledged_events = "boot-1", snap.acknowledged_events
    (f,) = _judge(snap2)
    assert f.status is FAIL and f.metrics["host_nvme_controller"] == 1


def test_keys_of_host_events_are_distinct_from_xid_keys():
    text = "[77.5] EDAC MC3: 1 UE memory read error on DIMM (x)\n[77.5] NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n"
    snap = _snap(text)
    keys = {event_key(ev, "b") for ev in snap.kernel_events}
    assert len(keys) == 2


def test_site_override_changes_a_class():
    policy = load_host_event_policy(overrides={"aer_corrected": {"severity": "ignore"}})
    text = "[1.0] pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"

    class Exp:
        host_event_policy = policy

    assert [f.status for f in host_events(_snap(text), Exp(), {})] == [PASS]
    with pytest.raises(ValueError, match="unknown class"):
        load_host_event_policy(overrides={"nope": {"severity": "fail"}})
    with pytest.raises(ValueError, match="warn_count"):
        load_host_event_policy(overrides={"edac_ce": {"warn_count": 500}})


def test_judge_runs_host_events_in_every_node_context():
    snap = _snap("[1.0] Buffer I/O error on dev sda1, logical block 0, lost sync page write\n",
                 taken_at="2024-01-01T00:00:00+00:00")
    for context in ("prolog", "epilog", "slurm-check", "check"):
        verdict = judge(snap, default_expectations(), context, only=["host.events"])
        assert verdict.status is FAIL, context


def test_a_storm_keeps_the_newest_events_and_oversized_input_is_refused():
    from healthcheck.parsers import ParseError
    from healthcheck.parsers.host_events import MAX_EVENTS

    storm = "".join(f"[{i}.0] EDAC MC0: 1 CE error on x\n" for i in range(MAX_EVENTS + 500))
    events = parse_host_events(storm)
    assert len(events) == MAX_EVENTS and events[-1].uptime_s == MAX_EVENTS + 499.0
    assert events[0].uptime_s == 500.0
    with pytest.raises(ParseError):
        parse_host_events("x\n" * 2_000_001)
    with pytest.raises(ParseError):
        parse_host_events(12345)


# --------------------------------------------------------------------------- severity per context

FLAPS = "".join(f"[{100 + 10 * i}.0] mlx5_core 0000:17:00.0 ib0: Link down\n"
                f"[{105 + 10 * i}.0] mlx5_core 0000:17:00.0 ib0: Link up\n" for i in range(5))
# An example class whose severity differs per context (the packaged policy has none today: see
# docs/host-events.md): link flaps only WARN in the prolog and are passed over in the burn-in.
EXAMPLE_POLICY = """
[[event]]
class = "link_down"
literal = "ink"
patterns = ['^(?P<driver>[\\w.-]{1,32}) (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]) (?P<dev>[\\w.-]{1,32}): Link down\\b']
severity = "fail"
severity_by_context = { prolog = "warn", burnin = "ignore" }
min_count = 5
window_s = 86400
"""


class _Exp:
    def __init__(self, policy):
        self.host_event_policy = policy


def test_severity_by_context_applies_in_its_contexts_only():
    exp = _Exp(load_host_event_policy(EXAMPLE_POLICY))
    rule = exp.host_event_policy.rule("link_down")
    assert rule.by_context == {"prolog": "warn", "burnin": "ignore"}
    snap = _snap(FLAPS)
    got = {ctx: [f.status for f in host_events(snap, exp, {"_context": ctx})]
           for ctx in ("prolog", "epilog", "slurm-check", "check", "burnin", None)}
    assert got == {"prolog": [WARN], "epilog": [FAIL], "slurm-check": [FAIL], "check": [FAIL],
                   "burnin": [PASS], None: [FAIL]}  # None: a direct call, the class's severity


def test_the_runner_tells_host_events_its_context(monkeypatch):
    """judge() passes its context down (threshold key "_context"); the packaged policy is swapped for
    the example one where the check looks it up."""
    from healthcheck.policies import host_events as hp

    policy = load_host_event_policy(EXAMPLE_POLICY)
    monkeypatch.setattr(hp, "default_policy", lambda: policy)
    snap = _snap(FLAPS, taken_at="2024-01-01T00:00:00+00:00")
    status = {ctx: judge(snap, default_expectations(), ctx, only=["host.events"]).status
              for ctx in ("prolog", "slurm-check", "epilog")}
    assert status == {"prolog": WARN, "slurm-check": FAIL, "epilog": FAIL}


def test_packaged_policy_judges_flaps_and_fatal_mce_alike_in_every_context():
    """The decision of docs/host-events.md: no packaged class differs by context today, and the
    classes where the question is live say why in their note."""
    policy = load_host_event_policy()
    assert {name: r.by_context for name, r in policy.rules.items() if r.by_context} == {}
    snap = _snap(FLAPS, taken_at="2024-01-01T00:00:00+00:00")
    for ctx in ("prolog", "epilog", "slurm-check", "check", "burnin"):
        assert judge(snap, default_expectations(), ctx, only=["host.events"]).status is FAIL, ctx
    import tomllib
    from healthcheck.policies.host_events import default_policy_text

    notes = {e["class"]: e.get("note", "") for e in tomllib.loads(default_policy_text())["event"]}
    assert all(notes[c] for c in ("mce_fatal", "edac_ce", "link_down", "link_up_repeated"))


@pytest.mark.parametrize("value, words", [
    ('{ pro-log = "warn" }', "unknown context 'pro-log'"),
    ('{ prolog = "drain" }', "severity_by_context.prolog"),
    ('"warn"', "must be a table"),
])
def test_bad_severity_by_context_is_refused(value, words):
    text = EXAMPLE_POLICY.replace('{ prolog = "warn", burnin = "ignore" }', value)
    with pytest.raises(ValueError, match=words):
        load_host_event_policy(text)


def test_overrides_set_or_drop_severity_by_context():
    flaps = load_host_event_policy(overrides={"link_down": {"severity_by_context": {"prolog": "warn"}}})
    assert flaps.rule("link_down").severity_in("prolog") == "warn"
    assert flaps.rule("link_down").severity_in("slurm-check") == "fail"
    base = load_host_event_policy(EXAMPLE_POLICY)
    from healthcheck.policies.host_events import _override

    kept = _override(base.rule("link_down"), {"min_count": 3})
    assert kept.by_context == {"prolog": "warn", "burnin": "ignore"}
    # a site's severity alone applies in every context
    assert _override(base.rule("link_down"), {"severity": "warn"}).by_context == {}
    with pytest.raises(ValueError, match="unknown context"):
        load_host_event_policy(overrides={"link_down": {"severity_by_context": {"nowhere": "warn"}}})


def test_the_cached_policy_keeps_severity_by_context():
    """The cached path (_build(data, validated=True)) reads severity_by_context back as the file did."""
    import json
    import tomllib

    from healthcheck.policies.host_events import _build

    data = json.loads(json.dumps(tomllib.loads(EXAMPLE_POLICY)))
    rule = _build(data, validated=True).rule("link_down")
    assert rule._patterns is None and rule.severity_in("prolog") == "warn" and rule.severity_in("epilog") == "fail"


def test_the_context_key_is_reserved():
    from healthcheck.checks import registry
    from healthcheck.config import ConfigError, loads

    assert registry.CONTEXT_KEY == "_context"
    with pytest.raises(ValueError, match="reserved"):
        registry.check("x.reserved", needs=("host",), thresholds={"_context": "prolog"})
    with pytest.raises(ConfigError, match="threshold name '_context' is reserved"):
        loads('[defaults.thresholds."host.events"]\n_context = "prolog"\n', "site.toml")
