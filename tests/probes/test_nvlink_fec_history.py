"""Issue 33, point 2 (FEC history): the NVLink5 FEC history bins (NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0..15)
are read where asked (bundles), in one field values call per GPU whose links report NVLink5 counters,
recorded per link and never judged (no public threshold); the hooks' probe does not read them."""
from __future__ import annotations

import json

import pytest

from healthcheck.bundles.archive import snapshot_from_bundle, write_bundle
from healthcheck.core.model import Snapshot, Status
from healthcheck.probes.nvml import FEC_BINS, probe_gpus

from tests.checks.gpu_builders import by_component, run
from tests.fakes.fake_pynvml import FakeNvml, b200_hgx_node, gb200_nvl72_tray, h100_node, nvlink5_counters

pytest.importorskip("pynvml")
BINS = [9_000_000, 4_100, 37, 2] + [0] * 12


def _tray():
    fakes = gb200_nvl72_tray()
    for fake in fakes:
        fake.nvlink_field_values = nvlink5_counters(fec_history=BINS)
    return FakeNvml(fakes)


def test_the_bins_are_read_where_asked_in_one_call_more_per_gpu():
    fake = _tray()
    gpus = probe_gpus(nvml=fake, nvlink_fec=True)
    assert FEC_BINS == 16 and len(gpus) == 4
    assert {tuple(link.fec_history) for g in gpus for link in g.nvlinks} == {tuple(BINS)}
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 3 * len(gpus)  # links, FEC history, the rest


def test_the_hooks_probe_does_not_read_them():
    fake = _tray()
    gpus = probe_gpus(nvml=fake)
    assert all(link.fec_history is None for g in gpus for link in g.nvlinks)
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 2 * len(gpus)  # as before issue 33's FEC item


@pytest.mark.parametrize("node", [h100_node(2), b200_hgx_node(2)], ids=["hopper", "b200-without-nvlink5-fields"])
def test_no_call_where_the_links_report_no_nvlink5_counters(node):
    fake = FakeNvml(node)
    gpus = probe_gpus(nvml=fake, nvlink_fec=True)
    assert all(link.fec_history is None for g in gpus for link in g.nvlinks or [])
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 2 * len(gpus)


def test_a_driver_without_the_fields_leaves_them_unset():
    fakes = gb200_nvl72_tray()  # NVLink5 counters, no FEC history field: NOT_SUPPORTED per bin
    gpus = probe_gpus(nvml=FakeNvml(fakes), nvlink_fec=True)
    assert all(link.fec_history is None for g in gpus for link in g.nvlinks)
    assert gpus[0].error is None  # NotSupported is no error of the probe


def test_recorded_in_bundles_and_not_judged(tmp_path):
    gpus = probe_gpus(nvml=_tray(), nvlink_fec=True)
    snap = Snapshot(node="gb001", taken_at="2026-01-01T00:00:00Z", gpus=gpus, gpu_source="nvml")
    path = write_bundle(snap, tmp_path / "b", {}, sysfs_root=str(tmp_path / "nosys"), proc_root=str(tmp_path / "np"))
    back = snapshot_from_bundle(path)
    assert back.gpus[2].nvlinks[17].fec_history == BINS
    assert json.loads(json.dumps(back.gpus[0].nvlinks[0].fec_history)) == BINS
    found = by_component(run("gpu.nvlink.errors", back))
    assert {f.status for f in found.values()} == {Status.PASS}  # recorded only: no public threshold
    assert not any("fec_history" in key for f in found.values() for key in f.metrics)
    assert "FEC history" not in found["gpu0"].message


def test_collect_asks_for_them_and_the_live_default_does_not(tmp_path, monkeypatch):
    from healthcheck.bundles import collect
    from healthcheck.probes.live import LiveOptions

    seen = []

    class Stop(Exception):
        pass

    def snapshot_live(opts, *_args, **_kw):
        seen.append(opts)
        raise Stop

    monkeypatch.setattr(collect, "snapshot_live", snapshot_live)
    with pytest.raises(Stop):
        collect.collect_bundle(str(tmp_path / "b"))
    assert seen[0].nvlink_fec is True and LiveOptions().nvlink_fec is False
