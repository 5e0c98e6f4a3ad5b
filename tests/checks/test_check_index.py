"""The check index (healthcheck/checks/_index.py) is generated from the @check decorators and kept
current, and the runner imports a check module only when one of its checks is to run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from healthcheck.checks import registry

ROOT = Path(__file__).resolve().parents[2]


def test_the_index_is_current():
    path = ROOT / "healthcheck" / "checks" / "_index.py"
    assert path.read_text() == registry.index_source(), \
        "healthcheck/checks/_index.py is stale: python -m healthcheck.checks --write-index"


def test_the_index_agrees_with_the_decorators():
    specs = registry.load_all()
    idx = registry.index()
    assert set(idx) == set(specs)
    for name, entry in idx.items():
        spec = specs[name]
        assert (entry.needs, entry.contexts, entry.handles_missing, entry.thresholds) == \
            (spec.needs, spec.contexts, spec.handles_missing, spec.thresholds), name
        assert spec.func.__module__.endswith("." + entry.module)


def test_a_node_without_gpus_imports_only_the_gpu_modules_that_judge_absence():
    """Judging a host-only snapshot in the prolog context imports no GPU check module but those of the
    checks that judge absence themselves (gpu.count, gpu.responsive: handles_missing)."""
    code = """
import sys
from healthcheck.core.model import Snapshot, HostInfo
from healthcheck.core.expectations import Expectations
from healthcheck.pipeline.judge import judge
snap = Snapshot(node="n1", taken_at="2026-12-03T00:00:00+00:00", host=HostInfo(hostname="n1"))
verdict = judge(snap, Expectations(), "prolog")
assert any(f.check.startswith("gpu.") and f.status.value == "skip" for f in verdict.findings)
import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith("healthcheck.checks."))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    absence = {"healthcheck.checks." + e.module for e in registry.index().values() if e.handles_missing}
    gpu = {m for m in loaded if m.startswith("healthcheck.checks.gpu_")}
    assert gpu <= absence | {"healthcheck.checks.gpu_inventory"}, gpu  # (gpu_responsive imports it)
    assert "healthcheck.checks.gpu_ecc" not in loaded and "healthcheck.checks.gpu_thermal" not in loaded
    assert "healthcheck.checks.host" in loaded


def test_glob_matching_is_fnmatch():
    import fnmatch

    from healthcheck.checks.registry import matches

    names = ["gpu.ecc", "gpu.ecc.sram", "host.load", "ib.port.state", "gpu", "", "a*b", "x?y"]
    patterns = ["gpu.ecc", "gpu.*", "gpu*", "*", "", "*.ecc", "gpu.?cc", "[gh]*", "host.load*", "ib.*.state",
                "a*b", "x?y", "gpu.ecc*"]
    for name in names:
        for pattern in patterns:
            assert matches(name, pattern) == fnmatch.fnmatchcase(name, pattern), (name, pattern)
