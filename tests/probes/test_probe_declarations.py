"""A probe is declared in one place (issue 31.7): one ``Probe`` row of ``probes.live.PROBES``. The live
run, the deadlines, the schedule, the modules imported ahead (and warmed by the agent), the sources a
check may need and the text of a SKIP for an absent source all come from those rows."""
from __future__ import annotations

import _thread
import dataclasses
from pathlib import Path

import pytest

from healthcheck.checks import registry
from healthcheck.checks.registry import CheckSpec
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Finding, Snapshot, Status
from healthcheck.pipeline import judge
from healthcheck.probes import live

# The tables as they were kept by hand before the declarations (live.py, judge.py, registry.py).
BEFORE = {
    "DEFAULT_DEADLINES_S": {"gpus": 10.0, "kernel_events": 3.0, "ib_ports": 3.0, "pcie_links": 3.0, "host": 5.0,
                            "versions": 3.0, "storage": 10.0, "bmc": 20.0, "edac": 2.0, "pcie_aer": 3.0,
                            "mlxlink": 15.0},
    "INLINE_PROBES": ("kernel_events", "edac", "pcie_aer"),
    "WALKED_PROBES": ("ib_ports", "pcie_links", "host", "storage", "bmc", "mlxlink"),
    "EARLY_PROBES": ("gpus",),
    "PROBE_MODULES": {"ib_ports": "infiniband", "pcie_links": "pcie", "host": "host", "storage": "storage",
                      "bmc": "bmc", "mlxlink": "mlxlink", "edac": "host_counters", "pcie_aer": "host_counters",
                      "kernel_events": "kernel_cache", "gpus": "nvml", "versions": "versions"},
    "HANG_KINDS": {"gpus": "hang"},
    "ABSENT": {
        "gpus": "no NVIDIA GPU data (no NVIDIA GPU on the PCI bus, or none recorded in the bundle)",
        "gpu_pci_devices": "no PCI device data",
        "kernel_events": "no kernel log (none recorded in the bundle, or not read in this context)",
        "ib_ports": "no InfiniBand/RoCE data",
        "pcie_links": "no PCIe link data",
        "host": "no host data",
        "versions": "no version data",
        "job": "no job (runs in the epilog of a Slurm job)",
        "storage": "no storage data (not probed in this context, or none recorded in the bundle)",
        "bmc": "no BMC data (not probed in this context, or none recorded in the bundle)",
        "edac": "no EDAC memory-controller data (EDAC driver not loaded, or none recorded in the bundle)",
        "pcie_aer": "no PCIe AER data (not probed, or none recorded in the bundle)",
        "mlxlink": "no mlxlink data (not probed in this context, or none recorded in the bundle)",
    },
}
SOURCES_BEFORE = {"gpus", "gpu_pci_devices", "kernel_events", "ib_ports", "pcie_links", "host", "versions", "job",
                  "storage", "bmc", "edac", "pcie_aer", "mlxlink"}
TABLES = ("SOURCES", "DEFAULT_DEADLINES_S", "EARLY_PROBES", "INLINE_PROBES", "WALKED_PROBES", "PROBE_MODULES",
          "ABSENT", "HANG_KINDS")


def _of_old_sources(value):
    """A table less what probes declared since (a new probe does not change the old ones' rows)."""
    if isinstance(value, dict):
        return {source: v for source, v in value.items() if source in SOURCES_BEFORE}
    return tuple(source for source in value if source in SOURCES_BEFORE)


def test_the_derived_tables_equal_the_ones_kept_by_hand_before():
    for name, value in BEFORE.items():
        assert _of_old_sources(getattr(live, name)) == value, name
    assert set(live.SOURCES) >= SOURCES_BEFORE and len(set(live.SOURCES)) == len(live.SOURCES)
    # the threaded jobs are waited for in the order they were: the walked ones, then the GPUs'
    threaded = [p.source for p in live.PROBES if p.schedule in (live.EARLY, live.WALKED)]
    assert _of_old_sources(threaded) == (*BEFORE["WALKED_PROBES"], "gpus")


def test_every_table_is_derived_from_the_declarations():
    assert dict(zip(TABLES, live.derive(live.PROBES))) == {name: getattr(live, name) for name in TABLES}
    assert registry.SOURCES is live.SOURCES and judge.ABSENT is live.ABSENT
    assert live.LiveOptions().deadlines_s == live.DEFAULT_DEADLINES_S


def test_every_declared_source_is_a_snapshot_field_and_every_module_exists():
    fields = {f.name for f in dataclasses.fields(Snapshot)}
    assert set(live.SOURCES) <= fields
    here = Path(live.__file__).parent
    for probe in live.PROBES:
        assert probe.module is None or (here / f"{probe.module}.py").is_file(), probe
        assert (probe.read is None) == (probe.schedule == live.ELSEWHERE), probe


def test_a_new_declaration_is_picked_up_by_every_table():
    def read(opts, snap):
        return []

    new = live.Probe("widgets", read, "widgets", 1.5, live.WALKED, "no widget data (not probed)")
    tables = dict(zip(TABLES, live.derive(live.PROBES + (new,))))
    assert tables["SOURCES"][-1] == "widgets"
    assert tables["DEFAULT_DEADLINES_S"]["widgets"] == 1.5
    assert tables["WALKED_PROBES"] == (*live.WALKED_PROBES, "widgets")
    assert "widgets" not in tables["INLINE_PROBES"] + tables["EARLY_PROBES"]
    assert tables["PROBE_MODULES"]["widgets"] == "widgets"
    assert tables["ABSENT"]["widgets"] == "no widget data (not probed)"
    assert "widgets" not in tables["HANG_KINDS"]
    early = dataclasses.replace(new, schedule=live.EARLY, hang="hang")
    tables = dict(zip(TABLES, live.derive(live.PROBES + (early,))))
    assert tables["EARLY_PROBES"] == (*live.EARLY_PROBES, "widgets") and tables["HANG_KINDS"]["widgets"] == "hang"


@pytest.mark.parametrize("row, problem", [
    (live.Probe("host", live.PROBES[0].read, None, 1.0, live.WALKED, "x"), "declared twice"),
    (live.Probe("widgets", live.PROBES[0].read, None, None, live.WALKED, "x"), "no deadline"),
    (live.Probe("widgets", None, None, 1.0, live.INLINE, "x"), "no reader"),
    (live.Probe("widgets", live.PROBES[0].read, None, 1.0, "sometimes", "x"), "unknown schedule"),
    (live.Probe("widgets", live.PROBES[0].read, None, 1.0, live.WALKED, ""), "no absence text"),
])
def test_a_declaration_that_cannot_run_as_declared_is_refused(row, problem):
    with pytest.raises(ValueError, match=problem):
        live.derive(live.PROBES + (row,))


def test_a_check_skipped_for_an_absent_source_says_what_its_declaration_says():
    snap = Snapshot(node="n1", taken_at="2026-12-05T00:00:00+00:00")
    for probe in live.PROBES:
        spec = CheckSpec("test.absent", lambda s, e, t: [Finding("test.absent", Status.PASS, "ran")],
                         (probe.source,), frozenset({"check"}))
        (finding,) = judge.run_check(spec, snap, Expectations())
        assert (finding.status, finding.message) == (Status.SKIP, probe.absent), probe.source


def test_a_check_may_need_exactly_the_declared_sources():
    for source in live.SOURCES:
        registry.check("test.declared", needs=(source,))
    with pytest.raises(ValueError, match="unknown source 'widgets'"):
        registry.check("test.undeclared", needs=("widgets",))


def _recording(monkeypatch, pci_devices):
    """live.PROBES with every reader replaced by one that records where it ran and returns a marker."""
    ran, here = [], _thread.get_ident()

    def fake(source):
        def read(opts, snap):
            ran.append((source, _thread.get_ident() == here))
            return pci_devices if source == "gpu_pci_devices" else f"<{source}>"
        return read

    monkeypatch.setattr(live, "PROBES", tuple(p if p.read is None else dataclasses.replace(p, read=fake(p.source))
                                              for p in live.PROBES))
    return ran


def test_the_live_run_is_what_the_declarations_say(monkeypatch):
    ran = _recording(monkeypatch, ["0000:07:00.0"])
    snap = live.snapshot_live(live.LiveOptions(node="n1"), "2026-12-05T00:00:00+00:00")
    declared = [p.source for p in live.PROBES if p.schedule != live.ELSEWHERE]
    assert sorted(source for source, _ in ran) == sorted(declared)
    assert ran[0] == ("gpu_pci_devices", True)  # FIRST: before anything else, in the calling thread
    in_this_thread = [source for source, here in ran if here]
    assert in_this_thread == ["gpu_pci_devices", *live.INLINE_PROBES]
    assert ran[-1] == ("versions", False)  # AFTER: a thread of its own once the others are done
    for source in declared[1:]:
        assert getattr(snap, source) == f"<{source}>", source
    assert set(snap.probe_durations_s) == set(declared[1:]) and not snap.probe_errors
    assert snap.job is None


def test_a_source_no_check_needs_is_not_probed_nor_a_gpu_probe_without_gpus(monkeypatch):
    ran = _recording(monkeypatch, [])
    snap = live.snapshot_live(live.LiveOptions(node="n1"), "2026-12-05T00:00:00+00:00",
                              frozenset({"host", "gpus", "edac"}))
    assert [source for source, _ in ran] == ["gpu_pci_devices", "edac", "host"]
    assert snap.gpus is None and "gpus" not in snap.probe_durations_s
