"""Prolog baselines of error counters and epilog growth, on an 8-GPU HGX H100 node with 4 NDR HCAs."""
from __future__ import annotations

import copy
import json
import os
import stat
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.core.model import GpuInfo, IbPort, KernelEvent, NvLink, Snapshot
from healthcheck.slurm import baseline

IB_COUNTERS = {
    "symbol_error": 0, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0,
    "port_rcv_remote_physical_errors": 0, "port_rcv_switch_relay_errors": 0, "port_xmit_discards": 0,
    "port_xmit_constraint_errors": 0, "port_rcv_constraint_errors": 0,
    "local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 0, "VL15_dropped": 0,
    "port_xmit_wait": 123456, "port_xmit_data": 9876543210, "port_rcv_data": 8765432109,
    "port_xmit_packets": 55555, "port_rcv_packets": 44444, "unicast_xmit_packets": 55000,
    "multicast_rcv_packets": 12, "hw_out_of_buffer": 0, "hw_local_ack_timeout_err": 0,
    "hw_req_cqe_flush_error": 7, "hw_rx_write_requests": 100,
}


def h100_node() -> Snapshot:
    gpus = []
    for i in range(8):
        links = [NvLink(link=n, active=True, speed_gbps=26.562, replay_errors=0, recovery_errors=0,
                        crc_flit_errors=0, crc_data_errors=0) for n in range(18)]
        gpus.append(GpuInfo(
            index=i, pci_bus_id=f"0000:{0x18 + i * 0x10:02x}:00.0", uuid=f"GPU-0000000{i}",
            name="NVIDIA H100 80GB HBM3", ecc_corrected_volatile=0, ecc_uncorrected_volatile=0,
            retired_pages_sbe=None, retired_pages_dbe=None,  # Hopper remaps rows, retires no pages
            remap_correctable=0, remap_uncorrectable=0, pcie_replay_count=0, nvlinks=links))
    ports = [IbPort(device=f"mlx5_{n}", port=1, state="ACTIVE", phys_state="LinkUp", rate_gbps=400.0,
                    link_layer="InfiniBand", counters=dict(IB_COUNTERS)) for n in range(4)]
    events = [KernelEvent(kind="xid", pci_bus_id="0000:18:00.0", xid=13, uptime_s=100.0),
              KernelEvent(kind="fallen_off_bus", pci_bus_id="0000:28:00.0")]
    return Snapshot(node="gpu01", taken_at="2024-05-01T10:00:00Z", gpus=gpus, ib_ports=ports,
                    kernel_events=events)


def test_counters_of_a_healthy_h100_node():
    c = baseline.counters_of(h100_node())
    assert c["gpu0.ecc_corrected_volatile"] == 0.0 and c["gpu7.remap_uncorrectable"] == 0.0
    assert c["gpu3.pcie_replay_count"] == 0.0 and c["gpu3.nvlink_crc"] == 0.0
    assert c["gpu5.nvlink_replay"] == 0.0 and c["gpu5.nvlink_recovery"] == 0.0
    assert "gpu0.retired_pages_sbe" not in c and "gpu0.retired_pages_dbe" not in c  # None omitted
    assert c["xid_events"] == 1.0  # fallen_off_bus is not an Xid
    gpu_keys = {k.split(".", 1)[1] for k in c if k.startswith("gpu0.")}
    assert gpu_keys == {"ecc_corrected_volatile", "ecc_uncorrected_volatile", "remap_correctable",
                        "remap_uncorrectable", "pcie_replay_count", "nvlink_crc", "nvlink_replay",
                        "nvlink_recovery"}
    ib_keys = {k.split(".", 1)[1] for k in c if k.startswith("mlx5_2:1.")}
    assert ib_keys == {"symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
                       "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
                       "port_xmit_discards", "port_xmit_constraint_errors", "port_rcv_constraint_errors",
                       "local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped",
                       "hw_out_of_buffer", "hw_local_ack_timeout_err"}
    assert all(isinstance(v, float) for v in c.values())
    assert len([k for k in c if k.startswith("gpu")]) == 8 * 8


def test_nvlink_sums_flit_and_data_over_links_and_skips_unknown():
    snap = h100_node()
    links = snap.gpus[2].nvlinks
    links[0].crc_flit_errors, links[0].crc_data_errors = 5, 2
    links[17].crc_flit_errors, links[17].crc_data_errors = None, 4
    links[3].replay_errors, links[4].recovery_errors = 9, 1
    c = baseline.counters_of(snap)
    assert c["gpu2.nvlink_crc"] == 11.0 and c["gpu2.nvlink_replay"] == 9.0
    assert c["gpu2.nvlink_recovery"] == 1.0


def test_absent_sources_give_no_keys():
    snap = Snapshot(node="cpu01", taken_at="2024-05-01T10:00:00Z")
    assert baseline.counters_of(snap) == {}
    snap.gpus = [GpuInfo(index=0, lost=True, error="GPU is lost")]
    snap.ib_ports = [IbPort(device="mlx5_0", port=1)]
    snap.kernel_events = []
    assert baseline.counters_of(snap) == {"xid_events": 0.0}


def test_pre_ampere_gpu_reports_retired_pages_and_no_nvlink():
    snap = Snapshot(node="v100", taken_at="t", gpus=[GpuInfo(
        index=0, retired_pages_sbe=2, retired_pages_dbe=1, ecc_corrected_volatile=40, nvlinks=[])])
    c = baseline.counters_of(snap)
    assert c == {"gpu0.retired_pages_sbe": 2.0, "gpu0.retired_pages_dbe": 1.0,
                 "gpu0.ecc_corrected_volatile": 40.0}


def test_counters_of_survives_json_round_trip_of_the_snapshot():
    snap = h100_node()
    again = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert baseline.counters_of(again) == baseline.counters_of(snap)


def test_growth_during_a_job():
    before_snap = h100_node()
    after_snap = copy.deepcopy(before_snap)
    after_snap.gpus[3].ecc_corrected_volatile = 12
    after_snap.gpus[3].nvlinks[5].crc_flit_errors = 300
    after_snap.gpus[6].pcie_replay_count = 4
    after_snap.ib_ports[1].counters["symbol_error"] = 17
    after_snap.ib_ports[1].counters["port_xmit_data"] += 10 ** 9  # traffic is not an error
    after_snap.kernel_events.append(KernelEvent(kind="xid", xid=79, pci_bus_id="0000:48:00.0"))
    before, after = baseline.counters_of(before_snap), baseline.counters_of(after_snap)
    assert baseline.growth(before, after) == {
        "gpu3.ecc_corrected_volatile": 12.0, "gpu3.nvlink_crc": 300.0, "gpu6.pcie_replay_count": 4.0,
        "mlx5_1:1.symbol_error": 17.0, "xid_events": 1.0}
    assert baseline.resets(before, after) == {}


def test_counters_that_went_down_are_resets_not_growth():
    before = {"gpu0.ecc_corrected_volatile": 50.0, "mlx5_0:1.symbol_error": 3.0, "xid_events": 4.0}
    after = {"gpu0.ecc_corrected_volatile": 2.0, "mlx5_0:1.symbol_error": 5.0, "xid_events": 4.0,
             "gpu1.nvlink_crc": 9.0}  # only after: not measured at the start, no growth claimed
    assert baseline.growth(before, after) == {"mlx5_0:1.symbol_error": 2.0}
    assert baseline.resets(before, after) == {"gpu0.ecc_corrected_volatile": -48.0}
    assert baseline.growth({"x": float("nan")}, {"x": 5.0}) == {}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.floats(allow_nan=True)),
       st.dictionaries(st.sampled_from(["a", "b", "c", "e"]), st.floats(allow_nan=True)))
def test_growth_and_resets_properties(before, after):
    g, r = baseline.growth(before, after), baseline.resets(before, after)
    assert set(g) <= before.keys() & after.keys() and not set(g) & set(r)
    assert all(v > 0 for v in g.values()) and all(v < 0 for v in r.values())


# ----------------------------------------------------------------------------------------- storage


def test_save_load_discard(tmp_path):
    counters = baseline.counters_of(h100_node())
    path = baseline.save(tmp_path, "4711", counters)
    assert os.fspath(path) == os.fspath(tmp_path / "baselines" / "4711.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert baseline.load(tmp_path, "4711") == counters
    assert [p.name for p in path.parent.iterdir()] == ["4711.json"]  # no temp file left
    baseline.discard(tmp_path, "4711")
    assert baseline.load(tmp_path, "4711") is None
    baseline.discard(tmp_path, "4711")  # idempotent


def test_array_job_ids_and_overwrite(tmp_path):
    baseline.save(tmp_path, "123_4", {"xid_events": 1})
    baseline.save(tmp_path, "123_4", {"xid_events": 2})
    assert baseline.load(tmp_path, "123_4") == {"xid_events": 2.0}
    assert baseline.load(tmp_path, "123_5") is None


@pytest.mark.parametrize("job_id", ["", "../etc/passwd", "12/3", "12.3", "abc", "1 2", "-1", "_1",
                                    "1" * 65, "12\n", "123+0", 123])
def test_bad_job_ids_are_refused(tmp_path, job_id):
    for call in (lambda: baseline.save(tmp_path, job_id, {}), lambda: baseline.load(tmp_path, job_id),
                 lambda: baseline.discard(tmp_path, job_id)):
        with pytest.raises(ValueError):
            call()
    assert not (tmp_path / "baselines").exists() or not any((tmp_path / "baselines").iterdir())


@pytest.mark.parametrize("counters", [{"a": float("inf")}, {"a": "3"}, {"a": None}, {1: 2.0},
                                      {"a": True}])
def test_bad_counters_are_refused(tmp_path, counters):
    with pytest.raises(ValueError):
        baseline.save(tmp_path, "1", counters)


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b'{"counters": {"a": "x"}, "job_id": "7"}',
                                     b'{"counters": {"a": 1}, "job_id": "8"}'])
def test_corrupt_baseline_loads_as_none(tmp_path, content, caplog):
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "7.json").write_bytes(content)
    assert baseline.load(tmp_path, "7") is None
    assert "7.json" in caplog.text


def test_save_prunes_old_and_excess_baselines(tmp_path):
    now = time.time()
    for job in range(10):
        path = baseline.save(tmp_path, str(job), {"xid_events": float(job)}, now=now)
        age = (8 * 86400) if job < 3 else (100 - job)  # jobs 0-2 are from last week
        os.utime(path, (now - age, now - age))
    stale_tmp = tmp_path / "baselines" / ".99.abc.tmp"
    stale_tmp.write_text("{")
    os.utime(stale_tmp, (now - 9 * 86400,) * 2)
    baseline.save(tmp_path, "100", {"xid_events": 0.0}, now=now)
    names = sorted(p.name for p in (tmp_path / "baselines").iterdir())
    assert names == sorted(f"{j}.json" for j in list(range(3, 10)) + [100])
    removed = baseline.prune(tmp_path, now=now, max_files=3)
    assert sorted(p.name for p in removed) == ["3.json", "4.json", "5.json", "6.json", "7.json"]
    assert baseline.load(tmp_path, "100") == {"xid_events": 0.0}


def test_prune_of_missing_dir_is_a_no_op(tmp_path):
    assert baseline.prune(tmp_path / "absent") == []


def test_job_ids_and_error_counter_names_as_the_patterns_said():
    """Checked without re on the prolog's path: the same answers as the regular expressions they replace."""
    import re

    from healthcheck.slurm.baseline import is_ib_error_counter, validate_job_id

    for job_id in ["1", "123", "123_4", "_1", "1a", "", "١٢", "9" * 64, "9" * 65, "1_", "1 ", "12\n", "0"]:
        ok = re.fullmatch(r"[0-9][0-9_]{0,63}", job_id) is not None
        if ok:
            assert validate_job_id(job_id) == job_id
        else:
            with pytest.raises(ValueError):
                validate_job_id(job_id)
    for name in ["hw_rx_discards", "ERR_x", "rx_DROP", "req_cqe_flush_error", "duplicate_request", "Flush_drop",
                 "port_rcv_data", "hw_out_of_buffer"]:
        by_re = bool(re.search(r"(?i)err|discard|drop", name)) and not re.search(r"(?i)flush", name)
        assert is_ib_error_counter(name) == (name in {"hw_out_of_buffer"} or by_re), name
