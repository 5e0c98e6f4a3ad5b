"""Everything the hooks leave on the node is private to root: directories 0700, files 0600 (spool,
pending actions, baselines, the drained-by-us ledger, the parsed-TOML cache), whatever the umask.
Run with umask 0, so a mode that was not set explicitly shows."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from healthcheck.slurm import ledger
from tests.safety._hookrun import hook, write_config


def modes(*roots: Path) -> dict[str, int]:
    found = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files + ([] if folder != str(root) else [""]):
                path = os.path.join(folder, name) if name else folder
                found[path] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def test_hooks_create_only_0700_dirs_and_0600_files(tmp_path, node_bundles):
    state, spool, cache = tmp_path / "state", tmp_path / "spool", tmp_path / "cache"
    fake = tmp_path / "scontrol"  # slurmctld unreachable: the drain is queued (pending-actions.jsonl)
    fake.write_text("#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n")
    fake.chmod(0o755)
    healthy = write_config(tmp_path / "healthy.toml", str(node_bundles / "healthy"), str(state), str(spool))
    faulty = write_config(tmp_path / "faulty.toml", str(node_bundles / "faulty"), str(state), str(spool),
                          scontrol=str(fake))
    for context, config in (("prolog", healthy), ("slurm-check", faulty)):
        proc, _ = hook(context, config, cache, umask=0)
        assert "Traceback" not in proc.stderr, proc.stderr
    old = os.umask(0)
    try:  # the ledger is written after a drain slurmctld accepted: write it the way the hook does
        ledger.remember_drain(str(state / "node1"), "healthcheck: test", "prolog", [], lambda m: None)
    finally:
        os.umask(old)
    found = modes(state, spool, cache)
    names = {os.path.relpath(p, tmp_path) for p in found}
    for expected in ("spool/records.jsonl", "state/node1/baselines/4242.json",
                     "state/node1/pending-actions.jsonl", "state/node1/drained-by-us.json"):
        assert expected in names, sorted(names)
    assert any(n.startswith("cache/") and n.endswith(".marshal") for n in names), sorted(names)
    wrong = {os.path.relpath(p, tmp_path): oct(m) for p, m in found.items()
             if m != (0o700 if os.path.isdir(p) else 0o600)}
    assert wrong == {}, wrong
