"""Every collective judged against line-rate efficiency, and the alpha-beta fit judged: real recorded
nccl-tests outputs of every collective (the corpus) through the judge with the section their GPUs or
their fabric select, plus controlled sweeps for the cases the corpus does not hold."""
from __future__ import annotations

import pytest

from healthcheck.policies import references as R
from healthcheck.burnin.judge_nccl import CHECK, CHECK_FIT, judge_fit, judge_run, judge_runs
from healthcheck.burnin.nccl_run import NcclRun
from healthcheck.core.model import Status
from healthcheck.parsers import nccl_tests
from healthcheck.parsers.nccl_tests import NcclParseError, NcclRank, NcclResult, NcclRow, NcclSide
from healthcheck.burnin.summary import node_text
from tests.conftest import CORPUS

REFS = R.load()


def _run(text: str, collective: str, scope: str = "node", nodes=("n1",)) -> NcclRun:
    return NcclRun(collective, scope, list(nodes), [f"{collective}_perf"], result=nccl_tests.parse(text))


def _section(run: NcclRun, fabric: str | None):
    if fabric:
        return REFS.fabrics[fabric]
    names = {r.name for r in run.result.ranks if r.name}
    return REFS.sku_for(sorted(names)[0]) if names else None


def _judge(run: NcclRun, fabric: str | None = None):
    section = _section(run, fabric)
    ref = section.get(f"nccl_{run.collective}_busbw_gbps") if section else None
    line = section.get("line_rate_gbps") if section else None
    name = section.name if section else None
    return judge_run(run, ref, line, name, section=section), judge_fit(run, section, name)


# file -> (collective, scope, fabric, burnin.nccl status, burnin.nccl.alphabeta status or None)
CORPUS_EXPECTED = {
    "nccl-tests/all_reduce-a100-sxm4-40gb-8gpu-validation0-error-na-superbench.log":
        ("all_reduce", "node", None, Status.PASS, Status.PASS),
    "nccl-tests/all_reduce-a100-sxm4-8gpu-single-process.txt": ("all_reduce", "node", None, Status.PASS, Status.PASS),
    "nccl-tests/alltoall-a100-sxm4-40gb-8gpu-old-format-superbench.log":
        ("alltoall", "node", None, Status.PASS, Status.PASS),
    "nccl-tests/reduce_scatter-a100-sxm4-40gb-8gpu-nccl-info-in-table-superbench.log":
        ("reduce_scatter", "node", None, Status.PASS, Status.PASS),
    "peer/nccl-tests/superbench__nccl_allgather.log": ("all_gather", "node", None, Status.PASS, Status.PASS),
    "peer/nccl-tests/superbench__nccl_broadcast.log": ("broadcast", "node", None, Status.PASS, Status.PASS),
    "peer/nccl-tests/superbench__nccl_reduce.log": ("reduce", "node", None, Status.PASS, Status.PASS),
    # 8x A100-80GB, sizes from 32 MiB only: alpha cannot be judged, beta can
    "peer/nccl-tests/gcm__sample_single_success_output.txt": ("all_reduce", "node", None, Status.PASS, Status.PASS),
    # 2 nodes x 8 A100 (HDR generation): 177 GB/s busbw on 8x HDR, 89 % of its line rate
    "peer/nccl-tests/gcm__sample_pairwise_success_output.txt":
        ("all_reduce", "allocation", "hdr200x8", Status.PASS, Status.PASS),
    # 2 nodes x 8 H100 over a TCP-based transport: 294 GB/s is below what 8x NDR must give, and the
    # fitted latency (~143 us) is what a broken small-message path looks like on InfiniBand
    "peer/nccl-tests/a3mega__ztan-NCCL-test-result": ("all_reduce", "allocation", "ndr400x8", Status.FAIL, Status.FAIL),
    # no references for these GPUs (GH200, RTX, V100): failures still fail, figures pass with a note
    "nccl-tests/all_reduce-gh200-2node-8rank-device-busy-exclusive-process-nccltests2.17.8-issue369.txt":
        ("all_reduce", "node", None, Status.FAIL, None),
    "nccl-tests/all_reduce-rtx3090-2node-inc-offload-wrong-every-size-exp-notation-oob-108-failed.txt":
        ("all_reduce", "node", None, Status.FAIL, None),
    "nccl-tests/all_reduce-v100-2node-ib-error12-issue24-excerpt.txt": ("all_reduce", "node", None, Status.FAIL, None),
    "nccl-tests/all_reduce-v100-sxm3-dgx2-12gpu-ok-float-error-2e-07-old-format.log":
        ("all_reduce", "node", None, Status.PASS, None),
    "nccl-tests/alltoall-rtx5090-1gpu-issue287-excerpt.txt": ("alltoall", "node", None, Status.PASS, None),
}


def _corpus_nccl_files():
    files = []
    for folder in ("nccl-tests", "peer/nccl-tests"):
        if (CORPUS / folder).is_dir():
            files += [f"{folder}/{p.name}" for p in sorted((CORPUS / folder).iterdir()) if p.is_file()]
    return files


@pytest.mark.corpus
def test_every_corpus_nccl_output_has_an_expected_verdict():
    files = _corpus_nccl_files()
    if not files:
        pytest.skip("corpus absent")
    not_nccl = {"peer/nccl-tests/gcm__sample_failure_output.txt"}  # a peer tool's own summary, not nccl-tests
    assert set(files) - not_nccl == set(CORPUS_EXPECTED), "give the new corpus files an expected verdict"
    for name in not_nccl & set(files):
        with pytest.raises(NcclParseError):
            nccl_tests.parse((CORPUS / name).read_text(encoding="utf-8", errors="replace"))
    collectives = {v[0] for v in CORPUS_EXPECTED.values()}
    assert collectives >= set(R.COLLECTIVES) - {"sendrecv"}  # the corpus holds no sendrecv run


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(CORPUS_EXPECTED))
def test_corpus_outputs_through_the_judge(name):
    path = CORPUS / name
    if not path.is_file():
        pytest.skip("corpus file absent")
    collective, scope, fabric, status, fit_status = CORPUS_EXPECTED[name]
    run = _run(path.read_text(encoding="utf-8", errors="replace"), collective, scope,
               ("a", "b") if scope == "allocation" else ("n1",))
    finding, fitted = _judge(run, fabric)
    assert finding.check == CHECK and finding.status is status, finding
    if fit_status is None:
        assert fitted is None
    else:
        assert fitted.check == CHECK_FIT and fitted.status is fit_status, fitted
        assert fitted.metrics["alpha_us"] > 0 and fitted.metrics["fit_r2"] > 0.5
    if _section(run, fabric) is not None and finding.metrics.get("busbw_gbps"):
        assert "efficiency_pct" in finding.metrics  # every judged collective carries its efficiency


@pytest.mark.corpus
def test_broadcast_and_reduce_have_no_busbw_reference_and_are_judged_by_efficiency():
    a100 = REFS.by_name("a100_sxm")
    assert a100.get("nccl_broadcast_busbw_gbps") is None and a100.get("nccl_reduce_busbw_gbps") is None
    for coll, file in (("broadcast", "superbench__nccl_broadcast.log"), ("reduce", "superbench__nccl_reduce.log")):
        path = CORPUS / "peer" / "nccl-tests" / file
        if not path.is_file():
            pytest.skip("corpus file absent")
        finding, _ = _judge(_run(path.read_text(), coll))
        assert finding.status is Status.PASS and "% of the line rate, within a100_sxm line-rate efficiency" in \
            finding.message, finding.message
        assert 74.0 < finding.metrics["efficiency_pct"] < 77.0
        # the same run at 70 % of its speed: below the efficiency floor (60 %), a FAIL
        slow = _scaled(_run(path.read_text(), coll), 0.7)
        finding, _ = _judge(slow)
        assert finding.status is Status.FAIL and "below a100_sxm line-rate efficiency 75 % >= 60" in finding.message


@pytest.mark.corpus
def test_small_message_path_broken_is_a_finding_although_the_large_sizes_look_fine():
    """The A100 all_reduce with every size below 1 MiB taking 150 us more: the plateau, so the busbw
    finding, is untouched; the fitted latency is far above the NVLink reference."""
    path = CORPUS / "nccl-tests" / "all_reduce-a100-sxm4-8gpu-single-process.txt"
    if not path.is_file():
        pytest.skip("corpus file absent")
    good = _run(path.read_text(), "all_reduce")
    broken = _with_rows(good, [_shift(r, 150.0) if r.size_bytes < (1 << 20) else r for r in good.result.rows])
    before, fit_before = _judge(good)
    after, fit_after = _judge(broken)
    assert before.status is after.status is Status.PASS and before.metrics["busbw_gbps"] == after.metrics["busbw_gbps"]
    assert fit_before.status is Status.PASS
    assert fit_after.status is Status.FAIL and "small-message path is broken" in fit_after.message
    assert fit_after.metrics["alpha_us"] > 100.0


def test_exact_sweep_judges_alpha_and_beta_against_the_link_references():
    h100 = REFS.by_name("h100_sxm")
    fine = _sweep("all_reduce", alpha=30.0, beta=250.0, ranks=8)         # bus: 250 x 1.75 = 437.5 GB/s
    slow_path = _sweep("all_reduce", alpha=180.0, beta=250.0, ranks=8)
    slow_bw = _sweep("all_reduce", alpha=30.0, beta=80.0, ranks=8)        # bus 140 GB/s: 31 % of 450
    ok = judge_fit(fine, h100, "h100_sxm")
    assert ok.status is Status.PASS and ok.metrics["alpha_us"] == pytest.approx(30.0)
    assert ok.metrics["beta_busbw_gbps"] == pytest.approx(437.5, rel=1e-3)
    bad = judge_fit(slow_path, h100, "h100_sxm")
    assert bad.status is Status.FAIL and "latency alpha 180.0 us above h100_sxm reference 40 us" in bad.message
    warn = judge_fit(slow_bw, h100, "h100_sxm")
    assert warn.status is Status.WARN and "mid-to-large sizes are slow" in warn.message


def test_fit_without_the_sizes_it_needs_is_not_judged():
    h100 = REFS.by_name("h100_sxm")
    large_only = _sweep("all_reduce", alpha=500.0, beta=250.0, ranks=8, sizes=[1 << k for k in range(25, 34)])
    f = judge_fit(large_only, h100, "h100_sxm")
    assert f.status is Status.PASS and "alpha not judged: 0 sizes <= 64 KiB" in f.message  # beta still judged
    small_only = _sweep("all_reduce", alpha=500.0, beta=250.0, ranks=8, sizes=[1 << k for k in range(3, 12)])
    f = judge_fit(small_only, h100, "h100_sxm")
    assert f.status is Status.FAIL  # the latency is judged, the bandwidth is not
    assert "beta_busbw_gbps" not in f.metrics
    alpha_only = R.merge(REFS, '[link.nvlink4]\nnccl_beta_efficiency_pct = { value = 1.0, unit = "%" }\n', "site")
    f = judge_fit(large_only, alpha_only.by_name("h100_sxm"), "h100_sxm")
    assert f.status is Status.PASS  # a reference without bounds never judges; alpha not judged: a note


def test_no_section_or_a_failed_run_gives_no_fit_finding():
    run = _sweep("all_reduce", alpha=500.0, beta=10.0, ranks=8)
    assert judge_fit(run, None) is None
    failed = NcclRun("all_reduce", "node", ["n1"], [], result=run.result, error="timed out after 600 s")
    assert judge_fit(failed, REFS.by_name("h100_sxm")) is None
    assert judge_fit(run, REFS.by_name("h100_sxm")) is not None


def test_sendrecv_is_judged_by_efficiency_and_its_alpha_beta_across_nodes():
    ndr = REFS.fabrics["ndr400x8"]
    # one rail per rank: ~45 GB/s on 8x NDR is healthy for sendrecv, ~4 GB/s (TCP fall-back) is not
    healthy = _sweep("sendrecv", alpha=20.0, beta=45.0, ranks=16, scope="allocation")
    finding = judge_run(healthy, None, None, "fabric ndr400x8", section=ndr)
    assert finding.status is Status.PASS and 10.0 < finding.metrics["efficiency_pct"] < 12.0
    assert judge_fit(healthy, ndr, "fabric ndr400x8").status is Status.PASS
    tcp = _sweep("sendrecv", alpha=20.0, beta=4.0, ranks=16, scope="allocation")
    finding = judge_run(tcp, None, None, "fabric ndr400x8", section=ndr)
    assert finding.status is Status.FAIL and "below fabric ndr400x8 line-rate efficiency" in finding.message


def test_efficiency_never_hides_the_busbw_verdict_and_warns_above_line_rate():
    h100 = REFS.by_name("h100_sxm")
    ref, line = h100.get("nccl_all_gather_busbw_gbps"), h100.get("line_rate_gbps")
    low = _sweep("all_gather", alpha=30.0, beta=150.0, ranks=8)        # bus 131 GB/s: below both
    f = judge_run(low, ref, line, "h100_sxm", section=h100)
    assert f.status is Status.FAIL and "below h100_sxm reference" in f.message
    impossible = _sweep("all_gather", alpha=30.0, beta=700.0, ranks=8)  # bus 612 GB/s on a 450 GB/s link
    f = judge_run(impossible, None, line, "h100_sxm", section=h100)
    assert f.status is Status.WARN and "above h100_sxm line-rate efficiency" in f.message
    # without the section (callers that pass none) the verdicts are exactly today's
    assert judge_run(impossible, None, line, "h100_sxm").status is Status.PASS


def test_judge_runs_adds_one_fit_finding_per_run_and_the_report_shows_them():
    h100 = REFS.by_name("h100_sxm")
    runs = [_sweep("all_reduce", alpha=30.0, beta=260.0, ranks=8), _sweep("broadcast", alpha=250.0, beta=380.0, ranks=8)]
    out = judge_runs(runs, lambda c, s: (h100.get(f"nccl_{c}_busbw_gbps"), h100.get("line_rate_gbps")), "h100_sxm",
                     section=h100)
    assert [(f.check, f.component) for f in out] == [(CHECK, "all_reduce@node"), (CHECK_FIT, "all_reduce@node"),
                                                     (CHECK, "broadcast@node"), (CHECK_FIT, "broadcast@node")]
    assert [f.status for f in out] == [Status.PASS, Status.PASS, Status.PASS, Status.FAIL]
    record = {"node": "n1", "status": "fail", "burnin": {"suite": "full", "gpu_count": 8, "gpu_name": "NVIDIA H100 80GB HBM3",
                                                         "sku": "h100_sxm"},
              "results": [{"check": f.check, "status": f.status.value, "component": f.component, "message": f.message,
                           "metrics": f.metrics} for f in out]}
    text = node_text(record)
    assert "FAIL  burnin.nccl.alphabeta broadcast@node: broadcast on the node: latency alpha 250.0 us" in text
    assert "all_reduce@node efficiency_pct=" in text and "broadcast@node efficiency_pct=" in text


# --- helpers -----------------------------------------------------------------------------------------
_FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
            "sendrecv": lambda n: 1.0, "broadcast": lambda n: 1.0}


def _sweep(collective: str, alpha: float, beta: float, ranks: int, scope: str = "node",
           sizes=None) -> NcclRun:
    """An exact alpha-beta sweep as nccl-tests prints it (algbw = size / time, busbw = algbw x factor)."""
    factor = _FACTORS[collective](ranks)
    rows = []
    for size in sizes or [1 << k for k in range(3, 34)]:
        t = alpha + size / (beta * 1e3)
        alg = size / t / 1e3
        side = NcclSide(round(t, 2), round(alg, 2), round(alg * factor, 2), 0)
        rows.append(NcclRow(size, size // 4, "float", "sum", -1, side, side))
    result = NcclResult(rows, [NcclRank(i, "n1", i, None, "NVIDIA H100 80GB HBM3") for i in range(ranks)], [], [],
                        None, 0, True, None, {})
    return NcclRun(collective, scope, ["n1"] if scope == "node" else ["n1", "n2"], [], result=result)


def _with_rows(run: NcclRun, rows) -> NcclRun:
    r = run.result
    result = NcclResult(list(rows), r.ranks, r.errors, r.warnings, r.avg_busbw_gbps, r.out_of_bounds,
                        r.out_of_bounds_ok, r.version, r.header)
    return NcclRun(run.collective, run.scope, run.nodes, run.argv, result=result)


def _side(side: NcclSide, time_factor: float = 1.0, extra_us: float = 0.0, size: int = 0) -> NcclSide:
    if side.time_us is None:
        return side
    t = side.time_us * time_factor + extra_us
    scale = side.time_us / t
    return NcclSide(t, None if side.algbw_gbps is None else side.algbw_gbps * scale,
                    None if side.busbw_gbps is None else side.busbw_gbps * scale, side.wrong, side.error)


def _shift(row: NcclRow, extra_us: float) -> NcclRow:
    return NcclRow(row.size_bytes, row.count, row.type, row.redop, row.root, _side(row.oop, extra_us=extra_us),
                   _side(row.ip, extra_us=extra_us))


def _scaled(run: NcclRun, speed: float) -> NcclRun:
    """Every size ``speed`` times as fast (times divided, bandwidths multiplied)."""
    return _with_rows(run, [NcclRow(r.size_bytes, r.count, r.type, r.redop, r.root, _side(r.oop, 1 / speed),
                                    _side(r.ip, 1 / speed)) for r in run.result.rows])
