"""Issue 33.5: the NVLink-domain all_reduce is judged against a reference (`[fabric.nvl72_gb200]`, derived
from a public recorded GB200 NVL72 run in the corpus), not reported unjudged. The corpus files are read in
place: one rack (72 ranks) passes, two racks pass, the 20-rack run's busbw drop is judged below it; the
allocation step applies the figure only to GB200 trays; the nvl-domain template selects it."""
from __future__ import annotations

import json
import re

import pytest

from healthcheck.burnin import allocation
from healthcheck.burnin.judge_nccl import CHECK, fabric_gpu_mismatch, judge_run, large_busbw
from healthcheck.burnin.nccl_run import NcclRun
from healthcheck.burnin.settings import resolve
from healthcheck.core.model import Status
from healthcheck.parsers.nccl_tests import parse
from healthcheck.policies.references import load
from tests.burnin import nccl_double
from tests.burnin.test_nccl_phase import ENV_LAUNCHER
from tests.conftest import CORPUS, ROOT

REFS = load()
FABRIC = "nvl72_gb200"
NCCL = CORPUS / "blackwell" / "nccl-tests"
ONE_RACK = NCCL / "coreweave-nccl-tests__all-reduce-gb200-nvl72-1-rack-72-ranks-nccl2.26.2-large-sizes-excerpt.txt"
TWO_RACKS = NCCL / "coreweave-nccl-tests__all-reduce-gb200-2-racks-144-ranks-nccl2.26.2-large-sizes-excerpt.txt"
TWENTY_RACKS = NCCL / "coreweave-nccl-tests__all-reduce-gb200-20-racks-1440-ranks-busbw-drop-excerpt.txt"
TRAYS = [f"gb{i:03d}" for i in range(1, 19)]


def _corpus(path):
    if not path.is_file():
        pytest.skip(f"corpus file {path.name} absent")
    return path


def _run(path, nodes=TRAYS) -> NcclRun:
    return NcclRun("all_reduce", "allocation", list(nodes), ["all_reduce_perf"],
                   result=parse(_corpus(path).read_text(encoding="utf-8")), returncode=0)


def _judge(path) -> tuple:
    section = REFS.fabrics[FABRIC]
    run = _run(path)
    return run, judge_run(run, section.get("nccl_all_reduce_busbw_gbps"), None, f"fabric {FABRIC}",
                          section=section)


# --------------------------------------------------------------------------- the reference as data


def test_the_domain_reference_names_its_source_and_judges_only_what_it_measured():
    section = REFS.fabrics[FABRIC]
    ref = section.get("nccl_all_reduce_busbw_gbps")
    assert section.match == ["GB200"] and section.link == ""
    assert ref.value == 754.0 and ref.low_bound == pytest.approx(603.2) and ref.unit == "GB/s"
    assert "derived from the corpus" in ref.source and ONE_RACK.name in ref.source
    assert "coreweave/nccl-tests" in ref.source
    assert section.get("line_rate_gbps").value == 900.0
    # no link type: no efficiency or alpha-beta judgement borrowed from the single-node NVLink 5 figures
    assert section.get("nccl_all_reduce_efficiency_pct") is None and section.get("nccl_alpha_us") is None
    assert section.get("nccl_all_gather_busbw_gbps") is None  # no public figure: none invented
    assert "nvl72_gb300" not in REFS.fabrics


# --------------------------------------------------------------------------- the corpus, in place


@pytest.mark.corpus
def test_one_nvl72_rack_passes_its_reference():
    run, finding = _judge(ONE_RACK)
    assert len(run.result.rows) == 5 and run.result.wrong_total == 0
    assert large_busbw(run) == pytest.approx(753.944, abs=0.01)
    assert finding.status is Status.PASS, finding.message
    assert f"within fabric {FABRIC} reference 754 GB/s" in finding.message
    assert finding.metrics["efficiency_pct"] == pytest.approx(83.77, abs=0.01)  # shown, not judged


@pytest.mark.corpus
def test_two_racks_stay_within_the_reference():
    _run_, finding = _judge(TWO_RACKS)
    assert finding.status is Status.PASS and finding.metrics["busbw_gbps"] == pytest.approx(691.018, abs=0.01)


@pytest.mark.corpus
def test_the_twenty_rack_busbw_drop_is_judged_below_the_domain_reference():
    one = large_busbw(_run(ONE_RACK))
    run, finding = _judge(TWENTY_RACKS)
    drop = large_busbw(run)
    assert drop == pytest.approx(298.425, abs=0.01) and drop < 0.5 * one  # the file does show a drop
    assert run.result.wrong_total == 0 and run.result.out_of_bounds_ok is True  # no corruption: bandwidth only
    assert finding.status is Status.FAIL
    assert f"busbw 298.4 GB/s below fabric {FABRIC} reference 754 GB/s >= 603.2" in finding.message


# --------------------------------------------------------------------------- the allocation step


def test_a_domain_figure_applies_only_to_its_gpu_model():
    section = REFS.fabrics[FABRIC]
    assert fabric_gpu_mismatch(section, FABRIC, ["NVIDIA GB200"] * 18) is None
    gb300 = fabric_gpu_mismatch(section, FABRIC, ["NVIDIA GB200"] * 17 + ["NVIDIA GB300"])
    assert gb300.startswith("not judged: fabric nvl72_gb200 describes GB200 GPUs, the nodes report NVIDIA GB300")
    unnamed = fabric_gpu_mismatch(section, FABRIC, ["NVIDIA GB200", None])
    assert "not every node's burn-in record names its GPU" in unnamed
    assert fabric_gpu_mismatch(section, FABRIC, ["NVIDIA B200"]) is not None  # B200 is not GB200 (word start)
    assert fabric_gpu_mismatch(REFS.fabrics["ndr400x8"], "ndr400x8", [None, None]) is None  # no match: any GPU


def _results(tmp_path, gpu_name: str) -> str:
    results = tmp_path / "results"
    results.mkdir()
    for n in TRAYS:
        record = {"node": n, "status": "pass", "burnin": {"gpu_count": 4, "gpu_name": gpu_name, "sku": "gb200"},
                  "results": [{"check": "gpu.fabric", "status": "pass", "message": "m", "component": "gpu0"}]}
        (results / f"{n}.json").write_text(json.dumps(record))
    return str(results)


def _allocation(tmp_path, recording, gpu_name):
    double = nccl_double.install(tmp_path / "nccl", _corpus(recording), {}, gpus=4)
    settings = resolve({"results_dir": _results(tmp_path, gpu_name), "nccl_dir": str(double), "fabric": FABRIC,
                        "launcher": ENV_LAUNCHER, "nccl_collectives": ["all_reduce", "all_gather"],
                        "localise": False})
    return allocation.run_allocation(TRAYS, settings, REFS, "72")


@pytest.mark.corpus
def test_the_domain_burnin_judges_its_all_reduce_on_gb200_trays(tmp_path):
    out = _allocation(tmp_path, ONE_RACK, "NVIDIA GB200")
    reduce_, gather = out.collective
    assert (reduce_.check, reduce_.component) == (CHECK, "all_reduce@gb[001-018]")
    assert reduce_.status is Status.PASS and f"within fabric {FABRIC} reference" in reduce_.message
    assert gather.status is Status.PASS and f"no reference for fabric {FABRIC}" in gather.message
    assert out.drain == [] and out.status is Status.PASS


@pytest.mark.corpus
def test_the_domain_burnin_fails_a_rack_that_measures_the_20_rack_figure(tmp_path):
    out = _allocation(tmp_path, TWENTY_RACKS, "NVIDIA GB200")
    assert out.collective[0].status is Status.FAIL and "below fabric nvl72_gb200" in out.collective[0].message
    assert out.drain == []  # a job finding: the rack's collective, no tray named by it alone


@pytest.mark.corpus
def test_a_gb300_rack_is_measured_and_said_not_judged(tmp_path):
    out = _allocation(tmp_path, ONE_RACK, "NVIDIA GB300")
    finding = out.collective[0]
    assert finding.status is Status.WARN and "busbw 753.9 GB/s" in finding.message
    assert "not judged: fabric nvl72_gb200 describes GB200 GPUs, the nodes report NVIDIA GB300" in finding.message


# --------------------------------------------------------------------------- the template selects it


def test_the_nvl_domain_template_selects_the_domain_reference_and_its_sizes():
    text = (ROOT / "sbatch_templates" / "nvl-domain.sbatch").read_text()
    fabric = re.search(r"HEALTHCHECK_BURNIN_FABRIC=\$\{HEALTHCHECK_BURNIN_FABRIC:-(\w+)\}", text).group(1)
    max_bytes = int(re.search(r"HEALTHCHECK_BURNIN_NCCL_MAX_BYTES:-(\d+)\}", text).group(1))
    assert fabric == FABRIC and fabric in REFS.fabrics
    assert max_bytes == 8 << 30  # the corpus figure's largest size: a shorter sweep would average smaller sizes
