"""Documentation that is generated from code must match the code."""
from __future__ import annotations

from pathlib import Path

from healthcheck.checks.catalog_doc import markdown
from healthcheck.checks.registry import load_all

ROOT = Path(__file__).resolve().parents[1]

# The names the issue made a contract (history, drains and dashboards key on them).
CONTRACT = """gpu.count gpu.lost gpu.ecc.mode gpu.ecc.uncorrected gpu.ecc.corrected gpu.retired_pages
gpu.row_remap gpu.xid gpu.nvlink.state gpu.nvlink.errors gpu.pcie.link gpu.pcie.replays gpu.temperature
gpu.throttle gpu.power gpu.persistence gpu.processes gpu.memory_used gpu.fabric gpu.reset_required
ib.port.state ib.port.rate ib.port.errors ib.hca.firmware pcie.hca.link host.cpu host.memory host.swap
host.mounts host.disk host.load host.services sw.versions gpu.responsive""".split()


def test_checks_doc_is_generated_from_the_registry():
    doc = (ROOT / "docs" / "checks.md").read_text()
    assert doc == markdown(), "docs/checks.md is stale: healthcheck checks --format markdown > docs/checks.md"


def test_contract_check_names_exist_and_are_documented():
    specs = load_all()
    assert set(CONTRACT) <= set(specs)
    for name in CONTRACT:
        assert len(specs[name].description) > 20, name


def test_readme_opens_with_the_two_commands():
    lines = [l for l in (ROOT / "README.md").read_text().splitlines() if l.strip()]
    assert lines[1] == "```sh"
    assert lines[2].startswith("sudo bash scripts/run-check.sh")
    assert lines[3].startswith("sudo bash scripts/run-tests.sh")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/run-tests.sh" in ci
