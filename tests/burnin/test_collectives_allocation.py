"""The allocation step judges the cross-node collective's alpha-beta fit against the fabric's link type
(a job finding) and the job summary shows it; the nccl double replays a recorded 2-node H100 output."""
from __future__ import annotations

from healthcheck.burnin import allocation
from healthcheck.burnin.judge_nccl import CHECK, CHECK_FIT
from healthcheck.policies.references import load, merge
from healthcheck.burnin.settings import resolve
from healthcheck.burnin.summary import allocation_text
from healthcheck.core.model import Status
from tests.burnin.test_nccl_phase import ENV_LAUNCHER, _results, double  # noqa: F401 - double is a fixture


def _run(tmp_path, double, refs):  # noqa: F811
    nodes = ["n1", "n2"]  # both healthy in the double: the all_reduce passes its fabric reference
    settings = resolve({"results_dir": _results(tmp_path, nodes, gpu_count=8), "nccl_dir": str(double),
                        "fabric": "ndr400x8", "launcher": ENV_LAUNCHER, "nccl_collectives": ["all_reduce"]})
    return allocation.run_allocation(nodes, settings, refs, "51")


def test_the_fabric_fit_is_judged_and_reported(tmp_path, double):  # noqa: F811
    out = _run(tmp_path, double, load())
    assert [(f.check, f.status) for f in out.collective] == [(CHECK, Status.PASS), (CHECK_FIT, Status.PASS)]
    fitted = out.collective[1]
    assert fitted.component == "all_reduce@n[1-2]" and 20.0 < fitted.metrics["alpha_us"] < 40.0
    assert "efficiency_pct" in out.collective[0].metrics
    assert "PASS  burnin.nccl.alphabeta all_reduce@n[1-2]: all_reduce across n[1-2]: latency alpha" in \
        allocation_text(out.to_dict())


def test_a_slow_small_message_path_is_a_job_finding_while_the_busbw_passes(tmp_path, double):  # noqa: F811
    refs = merge(load(), '[link.ib_ndr]\nnccl_alpha_us = { value = 10.0, upper = 0.5, unit = "us", source = "t" }\n',
                 "site")
    out = _run(tmp_path, double, refs)
    busbw, fitted = out.collective
    assert busbw.status is Status.PASS and fitted.status is Status.FAIL
    assert "small-message path is broken" in fitted.message and "fabric ndr400x8 reference 10 us" in fitted.message
    assert out.drain == []  # a job finding: nothing is drained on the fabric's latency
    assert "FAIL  burnin.nccl.alphabeta" in allocation_text(out.to_dict())
