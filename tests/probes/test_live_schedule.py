"""How the live probes are scheduled: the ones that cannot block in the kernel run in the calling
thread before the others' threads start (threads running Python at once hand the GIL over at its switch
interval); what may hang keeps its thread and its deadline."""
from __future__ import annotations

import _thread
import time

from healthcheck.model import Snapshot
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
