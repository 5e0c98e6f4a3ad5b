"""Shared test fixtures: project paths and the real-output corpus."""
from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# Real tool outputs from public sources (see its SOURCES.md); absent in a user's fresh checkout.
CORPUS = Path(os.environ.get("HEALTHCHECK_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files(subdir: str, pattern: str = "*") -> list[Path]:
    """Corpus files for parametrize; empty when the corpus is absent (the test then skips)."""
    folder = CORPUS / subdir
    return sorted(p for p in folder.glob(pattern) if p.is_file()) if folder.is_dir() else []


def corpus_params(subdir: str, pattern: str = "*"):
    files = corpus_files(subdir, pattern)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"corpus {subdir}/ absent"))]
    return [pytest.param(p, id=p.name) for p in files]


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _collector_unfrozen():
    """`healthcheck report` run in this process (CliRunner) freezes the cyclic collector's view of every
    object (cli/report.py: right for the command's own short-lived process): handed back after each test,
    so the suite's garbage cycles are still collected."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()


# The real local Slurm cluster (tests/slurmcluster.py): its fixtures and the hook that gives every test
# using them the `slurm` marker, for the tests of every subject that need a cluster (slurm, burnin,
# sweep, drill).
from tests.slurmcluster import (  # noqa: E402,F401 - fixtures and a hook, found by pytest by name
    pytest_collection_modifyitems, slurm_cluster, slurm_cluster_factory)
