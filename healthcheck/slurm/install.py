"""`healthcheck slurm install-hooks`: render the wrappers in prolog_epilog/ with absolute paths."""
from __future__ import annotations

import os
import sys
from pathlib import Path

HOOKS = {"prolog.sh": "Prolog", "epilog.sh": "Epilog", "healthcheck.sh": "HealthCheckProgram"}
TEMPLATES = Path(__file__).resolve().parent / "templates"


def template_text(name: str) -> str:
    """The wrapper template (shipped inside the package; prolog_epilog/ in the source tree holds the same)."""
    return (TEMPLATES / name).read_text()


def install_hooks(prefix: str, config: str, python: str | None = None,
                  slurm_conf: str | None = None) -> list[Path]:
    """Write the three hooks into ``prefix``. ``slurm_conf``: a slurm.conf outside the default place
    (exported as SLURM_CONF for the scontrol calls the hooks make)."""
    python = os.path.abspath(python or sys.executable)
    config = os.path.abspath(config)
    slurm_conf = os.path.abspath(slurm_conf) if slurm_conf else None
    for value, what in ((python, "python"), (config, "config"), (slurm_conf or "", "slurm.conf")):
        if any(c in value for c in " \t\n'\"\\$`;&|<>"):
            raise ValueError(f"{what} path {value!r} contains characters a hook must not carry")
    out = Path(prefix)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in HOOKS:
        env = f"export SLURM_CONF={slurm_conf}" if slurm_conf else ""
        text = (template_text(name).replace("@PYTHON@", python).replace("@CONFIG@", config)
                .replace("@ENV@", env))
        target = out / name
        partial = target.with_name(name + ".partial")
        partial.write_text(text)
        os.chmod(partial, 0o755)
        os.replace(partial, target)
        written.append(target)
    return written


def slurm_conf_lines(prefix: str) -> str:
    p = os.path.abspath(prefix)
    return "\n".join([
        f"Prolog={p}/prolog.sh",
        f"Epilog={p}/epilog.sh",
        f"HealthCheckProgram={p}/healthcheck.sh",
        "HealthCheckInterval=300",
        "HealthCheckNodeState=ANY,CYCLE",
        "PrologEpilogTimeout=60",
        "PrologFlags=Alloc",  # the prolog runs at allocation on every node of the job, not at its first step
    ]) + "\n"
