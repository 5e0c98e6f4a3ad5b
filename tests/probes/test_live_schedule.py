"""How the live probes are scheduled: the ones that cannot block in the kernel run in the calling
thread before the others' threads start (threads running Python at once hand the GIL over at its switch
interval); what may hang keeps its thread and its deadline."""
from __future__ import annotations

import _thread
import time

from healthcheck.core.model import Snapshot
from healthcheck.probes import live


def test_inline_jobs_run_first_in_the_calling_thread_and_the_rest_in_threads():
    order, here = [], _thread.get_ident()

    def job(name, result):
        def fn():
            order.append((name, _thread.get_ident() == here))
            return result
        return fn

    snap = Snapshot(node="n1", taken_at="2026-12-03T00:00:00+00:00", source="live")
    jobs = {"host": job("host", None), "kernel_events": job("kernel_events", []), "edac": job("edac", None)}
    live.run_bounded(jobs, {}, snap, inline=("kernel_events", "edac", "pcie_aer"))
    assert order[:2] == [("kernel_events", True), ("edac", True)] and order[2] == ("host", False)
    assert snap.kernel_events == [] and set(snap.probe_durations_s) == {"host", "kernel_events", "edac"}


def test_an_inline_jobs_error_is_that_probes_data_and_a_hung_threaded_job_is_cut_at_its_deadline():
    snap = Snapshot(node="n1", taken_at="2026-12-03T00:00:00+00:00", source="live")

    def broken():
        raise OSError("/dev/kmsg: Permission denied")

    jobs = {"kernel_events": broken, "gpus": lambda: time.sleep(30)}
    start = time.monotonic()
    live.run_bounded(jobs, {"gpus": 0.2}, snap, hang_kinds={"gpus": "hang"}, inline=live.INLINE_PROBES)
    assert time.monotonic() - start < 10  # the hung GPU costs its deadline, not its hang
    assert snap.probe_errors["kernel_events"].kind == "error" and "Permission denied" in snap.probe_errors["kernel_events"].message
    assert snap.probe_errors["gpus"].kind == "hang"


def test_what_may_hang_is_never_inline():
    assert not set(live.INLINE_PROBES) & {"gpus", "ib_ports", "host", "pcie_links", "storage", "bmc", "mlxlink", "versions"}


def test_walked_probes_share_a_thread_and_a_hung_one_holds_up_only_itself():
    """ib_ports hangs: pcie_links and host still answer (another thread took over), ib_ports is cut at
    its deadline; the GPU probe, never walked, runs in a thread of its own."""
    here, threads, release = _thread.get_ident(), {}, _thread.allocate_lock()
    release.acquire()
    start = time.monotonic()

    def job(name, hang=False):
        def fn():
            threads[name] = _thread.get_ident()
            if hang:
                release.acquire(True, 30)
            while name == "gpus" and "ib_ports" not in threads and time.monotonic() - start < 10:
                time.sleep(0.001)  # alive while ib_ports runs: two threads' idents differ only then
            return name
        return fn

    snap = Snapshot(node="n1", taken_at="2026-12-03T00:00:00+00:00", source="live")
    jobs = {"gpus": job("gpus"), "ib_ports": job("ib_ports", hang=True), "pcie_links": job("pcie_links"),
            "host": job("host")}
    try:
        live.run_bounded(jobs, {"ib_ports": 0.5}, snap, hang_kinds={"gpus": "hang"}, inline=live.INLINE_PROBES,
                         walked=live.WALKED_PROBES)
        assert time.monotonic() - start < 20  # the hang costs its deadline, not its 30 s
    finally:
        release.release()
    assert snap.probe_errors["ib_ports"].kind == "timeout" and snap.ib_ports is None
    assert (snap.pcie_links, snap.host, snap.gpus) == ("pcie_links", "host", "gpus")
    assert here not in threads.values()
    assert threads["ib_ports"] not in (threads["pcie_links"], threads["host"])  # taken over
    assert threads["gpus"] != threads["ib_ports"]


def test_the_gpu_probe_is_never_walked_and_nothing_walked_is_inline():
    assert "gpus" not in live.WALKED_PROBES and {"ib_ports", "pcie_links", "host"} <= set(live.WALKED_PROBES)
    assert not set(live.WALKED_PROBES) & set(live.INLINE_PROBES)
    assert set(live.WALKED_PROBES) | set(live.INLINE_PROBES) | {"gpus"} == set(live.DEFAULT_DEADLINES_S) - {"versions"}


def test_the_gpu_probe_starts_before_the_inline_ones_and_its_deadline_counts_from_its_start():
    """The GPU probe's thread is running while the inline probes run in the calling thread (it waits in
    the driver most of its time); hung, it is still cut at its deadline, counted from its own start."""
    assert live.EARLY_PROBES == ("gpus",) and not set(live.EARLY_PROBES) & set(live.INLINE_PROBES + live.WALKED_PROBES)
    seen, release = [], _thread.allocate_lock()
    release.acquire()

    def gpus():
        seen.append("gpus")
        release.acquire(True, 30)  # hangs until the test ends

    def kernel_events():
        end = time.monotonic() + 10
        while "gpus" not in seen and time.monotonic() < end:
            time.sleep(0.001)
        seen.append("kernel_events")
        return []

    snap = Snapshot(node="n1", taken_at="2026-12-04T00:00:00+00:00", source="live")
    start = time.monotonic()
    try:
        live.run_bounded({"gpus": gpus, "kernel_events": kernel_events}, {"gpus": 0.3}, snap,
                         hang_kinds={"gpus": "hang"}, inline=live.INLINE_PROBES, early=live.EARLY_PROBES)
    finally:
        release.release()
    assert seen == ["gpus", "kernel_events"]  # the inline probe found the GPU probe already running
    assert snap.probe_errors["gpus"].kind == "hang" and time.monotonic() - start < 10
    assert snap.kernel_events == [] and snap.probe_durations_s["gpus"] >= 0.3
