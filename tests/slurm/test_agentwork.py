"""The prepared child's warm-up (agentwork.warm_run): it probes and judges for the prolog and the epilog,
so an epilog through the agent finds its probes (PCIe AER) and its checks (job.*, pcie.aer) warm, and
keeps a reader of the kernel's ring buffer open for the run; it reads no GPU and writes nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WARM = """
import json, sys
from healthcheck.agent import work as agentwork
agentwork.warm_run(sys.argv[1], "n1")
from healthcheck.probes import kmsg
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("healthcheck", "pynvml")))))
print(json.dumps(kmsg.KMSG in kmsg._kept))
"""


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_the_warm_up_covers_the_epilog_reads_no_gpu_and_writes_nothing(tmp_path):
    config = tmp_path / "hc.toml"
    config.write_text(f'[slurm]\nstate_dir = "{tmp_path}/state"\nspool_dir = "{tmp_path}/spool"\n')
    before = _tree(tmp_path)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "SLURM_JOB_ID": "7",
           "HEALTHCHECK_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", WARM, str(config)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    listed, kept = out.stdout.splitlines()
    modules = set(json.loads(listed))
    # the kernel's ring buffer read, its reader kept open for the run (where this machine lets us read it)
    assert json.loads(kept) == os.access("/dev/kmsg", os.R_OK)
    assert {"healthcheck.checks.job", "healthcheck.checks.host_counters", "healthcheck.probes.host_counters",
            "healthcheck.probes.jobprocs"} <= modules  # the epilog's checks, its AER probe, its /proc scan
    assert not {m for m in modules if m.startswith("pynvml") or m == "healthcheck.probes.nvml"}
    # nothing written: no state, no spool record (the config's cache may be kept, under its own dir)
    assert [p for p in _tree(tmp_path) if p not in before and not p.startswith("cache")] == []


def test_the_agent_imports_pynvml_only_where_the_bus_shows_an_nvidia_gpu(monkeypatch):
    """Where there is a GPU, pynvml is imported once by the agent, not by every hook (~10-25 ms); the module
    alone, NVML's library is not loaded (that, and any GPU call, is each run's nvmlInit)."""
    import pynvml

    from healthcheck.probes import pcibus
    from healthcheck.agent import work as agentwork

    monkeypatch.delitem(sys.modules, "pynvml")
    monkeypatch.setattr(pcibus, "nvidia_gpu_present", lambda sysfs_root="/sys": [])
    assert agentwork.warm_nvml() is True and "pynvml" not in sys.modules
    monkeypatch.setattr(pcibus, "nvidia_gpu_present", lambda sysfs_root="/sys": ["0000:18:00.0"])
    assert agentwork.warm_nvml() is True and "pynvml" in sys.modules
    assert sys.modules["pynvml"] is not pynvml and sys.modules["pynvml"].nvmlLib is None  # imported, not loaded
    monkeypatch.setitem(sys.modules, "pynvml", None)  # a bus with a GPU and no importable pynvml
    assert agentwork.warm_nvml() is False


WARM_AGENT = """
import json, sys
from healthcheck.agent import main, work
main.warm(None)            # the agent, before it forks its spares
work.warm_run(sys.argv[1], "n1")  # a spare's prepared child, before its hook comes
print(json.dumps(sorted(m for m in sys.modules if m.startswith("healthcheck"))))
"""


def test_the_agent_warms_every_module_the_prolog_imports(tmp_path):
    """A module the prolog imports (tests/slurm/test_prolog_imports.py's allow-list) that neither the agent
    nor the prepared child has imported is imported again by every hook at the door (~0.3-0.5 ms each:
    issue 32's hook.net_window was)."""
    from tests.slurm.test_prolog_imports import OURS

    config = tmp_path / "hc.toml"
    config.write_text(f'[slurm]\nstate_dir = "{tmp_path}/state"\nspool_dir = "{tmp_path}/spool"\n')
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
           "HEALTHCHECK_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", WARM_AGENT, str(config)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    warmed = set(json.loads(out.stdout.splitlines()[-1]))
    # the wrappers' client runs in the hook's own process, never in the agent's workers
    assert sorted(OURS - warmed - {"healthcheck.hook.client"}) == []
