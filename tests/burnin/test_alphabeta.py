"""alpha-beta fit of nccl-tests sweeps: exact synthetic data, noise, degenerate input, real outputs."""
from __future__ import annotations

import math
import random

import pytest

from healthcheck.burnin.alphabeta import AlphaBeta, efficiency, fit
from healthcheck.parsers.nccl_tests import NcclRow, NcclSide, parse
from tests.conftest import CORPUS, FIXTURES

SWEEP = [2 ** k for k in range(3, 34)]  # 8 B .. 8 GiB, the usual -b 8 -e 8G -f 2


def _times(alpha: float, beta: float, sizes=SWEEP) -> list[tuple[int, float]]:
    return [(s, alpha + s / (beta * 1e3)) for s in sizes]


@pytest.mark.parametrize("alpha, beta", [(12.5, 150.0), (40.0, 230.0), (3.0, 25.0), (120.0, 5.5)])
def test_exact_synthetic_sweep_recovers_alpha_and_beta(alpha, beta):
    result = fit(_times(alpha, beta))
    assert result.alpha_us == pytest.approx(alpha, rel=1e-6)
    assert result.beta_gbps == pytest.approx(beta, rel=1e-6)
    assert result.r2 == pytest.approx(1.0) and result.points == len(SWEEP)


def test_noisy_sweep_within_one_percent():
    rng = random.Random(7)
    points = [(s, t * (1 + rng.uniform(-0.005, 0.005))) for s, t in _times(30.0, 190.0)]
    result = fit(points)
    assert result.alpha_us == pytest.approx(30.0, rel=0.01)
    assert result.beta_gbps == pytest.approx(190.0, rel=0.01)
    assert 0.99 < result.r2 <= 1.0


def test_relative_weights_keep_alpha_from_being_swamped():
    # +10% at the largest size only: an unweighted fit would move alpha by thousands of microseconds
    points = _times(25.0, 200.0)
    points[-1] = (points[-1][0], points[-1][1] * 1.10)
    result = fit(points)
    assert result.alpha_us == pytest.approx(25.0, rel=0.05)
    assert result.beta_gbps == pytest.approx(200.0, rel=0.15)


def test_rows_use_the_requested_side_and_skip_unusable_points():
    def row(size, oop_t, ip_t):
        return NcclRow(size, size // 4, "float", "sum", -1, NcclSide(oop_t, None, None, 0), NcclSide(ip_t, None, None, 0))
    rows = [row(0, 1.3, 1.3), row(1024, None, 11.0), row(4096, math.nan, 11.0)] + [
        row(s, t, 2 * t) for s, t in _times(10.0, 100.0, [1 << 16, 1 << 20, 1 << 24, 1 << 28])]
    oop = fit(rows)
    assert oop.points == 4 and oop.alpha_us == pytest.approx(10.0) and oop.beta_gbps == pytest.approx(100.0)
    ip = fit(rows, side="ip")
    assert ip.points == 6 and ip.alpha_us > 0
    with pytest.raises(ValueError):
        fit(rows, side="both")


@pytest.mark.parametrize("points", [
    [], [(8, 10.0), (16, 10.5)],                       # fewer than 3 usable points
    [(1024, 5.0), (1024, 5.5), (1024, 6.0)],            # one size: no slope
    [(8, 20.0), (1 << 20, 15.0), (1 << 30, 10.0)],      # time falls with size: negative bandwidth
    [(8, 20.0), (64, 20.0), (512, 20.0)],               # flat: infinite bandwidth
    [(0, 1.0), (8, 0.0), (16, -3.0), (32, math.inf)],   # nothing usable
])
def test_degenerate_input_gives_none(points):
    assert fit(points) is None


def test_corpus_a100_sweep():
    path = CORPUS / "nccl-tests" / "all_reduce-a100-sxm4-8gpu-single-process.txt"
    if not path.is_file():
        pytest.skip("corpus file absent")
    result = parse(path.read_text())
    ab = fit(result.rows)
    plateau = result.busbw_at_large_sizes()              # ~230 GB/s busbw, ~132 GB/s algbw
    assert isinstance(ab, AlphaBeta) and ab.points == 30
    assert 10.0 <= ab.alpha_us < 100.0                   # small sizes take ~39-42 us
    assert ab.alpha_us == pytest.approx(40.6, abs=1.0)
    assert plateau / 10 < ab.beta_gbps < plateau * 10    # same order of magnitude as the plateau
    assert 100.0 < ab.beta_gbps < 140.0 and ab.r2 > 0.9


def test_own_fixture_recovers_the_model_it_was_written_with():
    text = (FIXTURES / "nccl-tests" / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt").read_text()
    ab = fit(parse(text).rows, side="ip")
    assert ab.alpha_us == pytest.approx(29.0, rel=0.02) and ab.beta_gbps == pytest.approx(196.0, rel=0.02)


def test_efficiency():
    assert efficiency(360.0, 400.0) == pytest.approx(90.0)
    assert efficiency(0.0, 50.0) == 0.0
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            efficiency(10.0, bad)
