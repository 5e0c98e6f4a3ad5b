"""The burn-in's NIC phase (issue 32.5): loopback ib_write_bw per HCA port, from the nearest GPU's
memory where perftest has CUDA, and a NIC-only all_reduce, on fixture trees and recorded outputs; the
real perftest where it is installed; a real soft-RoCE loopback where the kernel allows one."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from healthcheck.burnin import nic
from healthcheck.burnin.judge_nic import LineRate, LoopbackRun, judge_loopback, judge_nccl_nic
from healthcheck.burnin.rdma import PairOutput
from healthcheck.burnin.settings import PHASES, resolve, SettingsError
from healthcheck.core.expectations import Expectations, IbPortExpect
from healthcheck.core.model import Status
from healthcheck.parsers.perftest_help import parse_help
from tests.conftest import CORPUS
from tests.fixtures.gpudirect_builder import GPU, HCA, build

CUDA_HELP = """Usage:
  ib_write_bw            start a server and wait for connection
      --use_cuda=<cuda device id> Use CUDA specific device for GPUDirect RDMA testing
      --use_cuda_bus_id=<cuda full BUS id> Use CUDA specific device, based on its full PCIe address, for GPUDirect RDMA testing
      --use_cuda_dmabuf Use CUDA DMA-BUF for GPUDirect RDMA testing
"""
HOST_HELP = """Usage:
  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)
      --use_hugepages  Use Hugepages instead of contig, memalign allocations.
"""


def _client(gbps: float) -> str:
    return ("---------------------------------------------------------------------------------------\n"
            "                    RDMA_Write BW Test\n"
            " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
            " Number of qps   : 4\t\tTransport type : IB\n"
            "---------------------------------------------------------------------------------------\n"
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            f" 1048576    20000            {gbps + 1:.2f}             {gbps:.2f}            0.046\n"
            "---------------------------------------------------------------------------------------\n")


def _help(text):
    return lambda tool, argv, timeout: SimpleNamespace(missing=False, stdout=text, stderr="", error=None, returncode=0)


def _ctx(tmp_path, exp=None, **settings):
    return SimpleNamespace(settings=resolve({"nccl_dir": str(tmp_path / "no-nccl"), **settings}), node="n1",
                           before=None, expectations=exp, extra={}, sysfs_root=None)


def test_help_says_whether_perftest_can_send_from_gpu_memory():
    cuda = parse_help(CUDA_HELP)
    assert cuda.cuda and cuda.cuda_bus_id and cuda.cuda_dmabuf and not cuda.rocm
    plain = parse_help(HOST_HELP)
    assert not (plain.cuda or plain.cuda_bus_id or plain.cuda_dmabuf)


def test_nic_is_a_node_phase_of_every_suite():
    assert "nic" in PHASES
    for suite in ("quick", "standard", "full"):
        assert resolve({"suite": suite}).phase_on("nic")
    with pytest.raises(SettingsError, match="nic_gpu_memory"):
        resolve({"nic_gpu_memory": "gpu"})


def test_loopback_from_the_nearest_gpu_memory_judged_against_the_class_rate(tmp_path):
    sys_root, _ = build(tmp_path)
    seen = []

    def runner(cmd):
        seen.append(cmd)
        return PairOutput(client_text=_client(372.0), server_text="")

    exp = Expectations(ib_rate_gbps=400.0)
    ctx = _ctx(tmp_path, exp)
    findings = nic.phase(ctx, runner=runner, help_run=_help(CUDA_HELP), sysfs_root=str(sys_root))
    loop = [f for f in findings if f.check == "burnin.nic.loopback"]
    assert [f.status for f in loop] == [Status.PASS]
    assert f"from GPU memory ({GPU})" in loop[0].message and "class ib.rate_gbps" in loop[0].message
    (cmd,) = seen
    assert cmd.server_argv[:3] == ["ib_write_bw", "-d", "mlx5_0"] and "-i" in cmd.server_argv
    assert f"--use_cuda_bus_id={GPU}" in cmd.server_argv and cmd.client_argv[-1] == "127.0.0.1"
    assert ctx.extra["nic"]["loopback"][0]["gpu_memory"] == GPU
    nccl = [f for f in findings if f.check == "burnin.nic.nccl"]
    assert nccl[0].status is Status.SKIP and "1 GPU(s)" in nccl[0].message


def test_slow_loopback_fails_and_host_memory_is_said(tmp_path):
    sys_root, _ = build(tmp_path)
    runner = lambda cmd: PairOutput(client_text=_client(190.0))  # noqa: E731 - x8 link: half the rate
    exp = Expectations(ib_per_port={"mlx5_0:1": IbPortExpect(rate_gbps=400.0)})
    findings = nic.phase(_ctx(tmp_path, exp), runner=runner, help_run=_help(HOST_HELP), sysfs_root=str(sys_root))
    (f,) = [f for f in findings if f.check == "burnin.nic.loopback"]
    assert f.status is Status.FAIL and "perftest built without CUDA" in f.message
    assert "80% of the 400 Gb/s line rate (class ib.per_port)" in f.message and f.metrics["gpu_memory"] == 0.0


def test_port_rate_is_the_line_rate_without_a_class(tmp_path):
    sys_root, _ = build(tmp_path, rate="200 Gb/sec (4X HDR)")
    findings = nic.phase(_ctx(tmp_path), runner=lambda cmd: PairOutput(client_text=_client(170.0)),
                         help_run=_help(HOST_HELP), sysfs_root=str(sys_root))
    assert "(port rate)" in findings[0].message and findings[0].status is Status.PASS


def test_down_port_no_hca_no_perftest_are_skipped_with_their_reason(tmp_path):
    sys_root, _ = build(tmp_path / "down", state="1: DOWN")
    out = nic.phase(_ctx(tmp_path), runner=lambda cmd: pytest.fail("a down port is not measured"),
                    help_run=_help(HOST_HELP), sysfs_root=str(sys_root))
    assert out[0].status is Status.SKIP and "DOWN" in out[0].message
    bare, _ = build(tmp_path / "bare", hca=False)
    out = nic.phase(_ctx(tmp_path), sysfs_root=str(bare))
    assert {f.status for f in out} == {Status.SKIP} and "no RDMA device" in out[0].message
    sys_root, _ = build(tmp_path / "noperf")
    missing = lambda tool, argv, timeout: SimpleNamespace(missing=True, stdout="", stderr="")  # noqa: E731
    out = nic.phase(_ctx(tmp_path), help_run=missing, sysfs_root=str(sys_root))
    assert out[0].status is Status.SKIP and "not installed (perftest)" in out[0].message


def test_failed_loopback_keeps_perftest_s_reason():
    run = LoopbackRun("mlx5_1", 1, value_gbps=None, error="client: Failed to modify QP 0x1234 to RTR")
    f = judge_loopback(run, LineRate(400.0, "port rate"), 0.8)
    assert f.status is Status.FAIL and "to RTR" in f.message and f.component == "mlx5_1:1"


@pytest.mark.parametrize("name", ["amd-alibaba__ib_write_bw-gdr-rocm-client-ionic.txt",
                                  "amd-alibaba__ib_write_bw-bidir-client-ionic-roce-report_gbits.txt"])
def test_recorded_perftest_outputs_through_the_phase(tmp_path, name):
    path = CORPUS / "perftest" / name
    if not path.exists():
        pytest.skip(f"corpus file {path} absent")
    sys_root, _ = build(tmp_path)
    findings = nic.phase(_ctx(tmp_path), runner=lambda cmd: PairOutput(client_text=path.read_text()),
                         help_run=_help(HOST_HELP), sysfs_root=str(sys_root))
    (f,) = [f for f in findings if f.check == "burnin.nic.loopback"]
    assert f.metrics["bw_gbps"] > 0 and f.status in (Status.PASS, Status.FAIL)


def _fake_all_reduce(folder: Path) -> None:
    """An all_reduce_perf that prints a table only when NCCL was kept off NVLink and shared memory."""
    folder.mkdir()
    script = folder / "all_reduce_perf"
    script.write_text("""#!/bin/sh
if [ "$NCCL_P2P_DISABLE" != 1 ] || [ "$NCCL_SHM_DISABLE" != 1 ] || [ "$NCCL_NET" != IB ]; then
  echo "n1: Test NCCL failure common.cu:1 'P2P still on'"; exit 3
fi
echo "# nThread 1 nGpus 2 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 10 agg iters: 1 validation: 1 graph: 0"
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
echo "   268435456      67108864     float     sum      -1   6000.0   44.74   44.74      0   6000.0   44.74   44.74      0"
echo "  1073741824     268435456     float     sum      -1  24000.0   44.74   44.74      0  24000.0   44.74   44.74      0"
echo "# Out of bounds values : 0 OK"
echo "# Avg bus bandwidth    : 44.74"
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_nic_only_all_reduce_runs_with_p2p_and_shm_off(tmp_path):
    _fake_all_reduce(tmp_path / "nccl")
    refs = nic.references()
    run = nic.run_nccl(str(tmp_path / "nccl"), 2, 30.0, "n1", refs, environ={"NCCL_P2P_DISABLE": "0"})
    assert run.error is None and run.argv[-2:] == ["-g", "2"]
    ok = judge_nccl_nic(run, LineRate(400.0, "port rate"), 0.6, 2, 2)
    assert ok.status is Status.PASS and ok.metrics["busbw_gbps"] == pytest.approx(44.74)
    slow = judge_nccl_nic(run, LineRate(800.0, "port rate"), 0.6, 2, 2)  # floor 60 GB/s
    assert slow.status is Status.FAIL and "below 60.0 GB/s" in slow.message
    shared = judge_nccl_nic(run, LineRate(800.0, "port rate"), 0.6, 1, 2)  # one NIC for two GPUs: floor 30
    assert shared.status is Status.PASS and "1/2 NICs per GPU" in shared.message


def test_nccl_missing_binary_is_a_skip(tmp_path):
    run = nic.run_nccl(str(tmp_path / "none"), 2, 5.0, "n1", nic.references())
    assert judge_nccl_nic(run, None, 0.6, 1, 2).status is Status.SKIP


@pytest.mark.skipif(shutil.which("ib_write_bw") is None, reason="perftest not installed (apt-get install perftest)")
def test_real_perftest_help_and_a_loopback_without_a_device():
    """The real ib_write_bw: its help is read (Debian's build has no CUDA) and a loopback on a device
    that is not there fails with perftest's own words, through the real subprocess seam."""
    features, why = nic.perftest_features()
    assert why is None and features is not None
    runs = nic.run_loopbacks([{"device": "hc_absent0", "port": 1, "state": "ACTIVE"}], [], {}, features, "auto",
                             1.0, 20.0, nic.references())
    (run,) = runs
    assert run.value_gbps is None and run.error
    f = judge_loopback(run, LineRate(100.0, "port rate"), 0.8)
    assert f.status is Status.FAIL and "host memory (no GPU on this node)" in f.message


def _rxe_device() -> str | None:
    base = Path("/sys/class/infiniband")
    found = sorted(p.name for p in base.iterdir() if p.name.startswith("rxe")) if base.is_dir() else []
    return found[0] if found else None


@pytest.mark.skipif(shutil.which("ib_write_bw") is None or _rxe_device() is None,
                    reason="no soft-RoCE device: create one with `modprobe rdma_rxe; rdma link add rxe0 type rxe "
                           "netdev IFACE` (this development container's kernel has no rdma_rxe module and no "
                           "RDMA netlink: 'Failed to open NETLINK_RDMA socket')")
def test_real_loopback_over_soft_roce():
    device = _rxe_device()
    features, _ = nic.perftest_features()
    (run,) = nic.run_loopbacks([{"device": device, "port": 1, "state": "ACTIVE"}], [], {}, features, "host", 2.0,
                               60.0, nic.references())
    assert run.error is None and run.value_gbps and run.value_gbps > 0
