"""`healthcheck slurm install-hooks`: write the Slurm hooks from the one set of templates.

The templates live in the package (``healthcheck/deploy/templates/*.sh``, package data), so an
installed wheel can write the hooks. ``prolog_epilog/*.sh`` in the source tree are not templates: they
are the hooks rendered for the default layout (``DEFAULT_PYTHON``, ``DEFAULT_CONFIG``), committed
executable, and a test checks they equal ``render(name)``; ``write_shipped`` regenerates them.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..core.agentpaths import DEFAULT_SOCKET, paths_for

HOOKS = {"prolog.sh": "Prolog", "epilog.sh": "Epilog", "healthcheck.sh": "HealthCheckProgram"}
UNIT = "healthcheck-agent.service"  # the warm agent the hooks hand their work to (healthcheck.agent.main)
CLIENT = "client.bash"  # the part the three hooks share: the agent's door, else the Python client
TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_PYTHON = "/opt/healthcheck/.venv/bin/python"
DEFAULT_CONFIG = "/etc/healthcheck/healthcheck.toml"
_UNSAFE = " \t\n\r'\"\\$`;&|<>"


def template_text(name: str) -> str:
    """The template ``name`` (one of HOOKS, or UNIT), as shipped inside the package; a hook's with the
    part the hooks share (CLIENT) in its place."""
    if name not in HOOKS and name != UNIT:
        raise ValueError(f"no hook template {name!r} (known: {', '.join([*HOOKS, UNIT])})")
    text = (TEMPLATES / name).read_text()
    return text.replace("@CLIENT@\n", (TEMPLATES / CLIENT).read_text()) if name in HOOKS else text


def _check_paths(*pairs: tuple[str | None, str]) -> None:
    for value, what in pairs:
        if value is None:
            continue
        if not os.path.isabs(value):
            raise ValueError(f"{what} path {value!r} is not absolute")
        if any(c in value for c in _UNSAFE):
            raise ValueError(f"{what} path {value!r} contains characters a hook must not carry")


def package_path(python: str) -> str | None:
    """The directory holding the ``healthcheck`` package as ``python`` imports it, when that is the
    interpreter running now (``install-hooks`` run from the hooks' venv): the site-packages of a wheel
    install, the source tree of an editable one. None for another interpreter."""
    if os.path.abspath(python) != os.path.abspath(sys.executable):
        return None
    return str(Path(__file__).resolve().parents[2])


def _site_expression(python: str, site: str | None) -> str:
    """The Python expression of the path the hooks import the package from (they run without the site
    set-up, ``-S``): ``site``, else the venv's site-packages beside ``python`` for the running version."""
    if site is not None:
        return f'"{site}"'
    venv = os.path.dirname(os.path.dirname(python))
    return f'"{venv}/lib/python" + str(sys.version_info[0]) + "." + str(sys.version_info[1]) + "/site-packages"'


def render(name: str, python: str = DEFAULT_PYTHON, config: str = DEFAULT_CONFIG,
           slurm_conf: str | None = None, agent: str | None = DEFAULT_SOCKET, site: str | None = None) -> str:
    """The hook ``name`` with absolute paths filled in: a bash script that hands the hook to the warm
    agent at its door, else runs the Python client (``python -IS -c``). ``agent``: the agent's socket
    (its door and pid file beside it; None: the hook always runs in its own process). ``site``: the
    directory holding the package (:func:`package_path`; None: the venv's site-packages beside
    ``python``). Raises ValueError for a path a shell line or a Python literal would misread (spaces,
    quotes, ``$``, ``;`` ...) or that is not absolute."""
    if name == UNIT:
        return render_unit(python, config, agent or DEFAULT_SOCKET)
    _check_paths((python, "python"), (config, "config"), (slurm_conf, "slurm.conf"), (agent, "agent socket"),
                 (site, "package"))
    # the paths go into shell words and Python string literals: _check_paths refused quotes, backslashes,
    # blanks and what a shell expands
    env = f'import os\nos.environ["SLURM_CONF"] = "{slurm_conf}"\n' if slurm_conf else ""
    door, pid_file = paths_for(agent) if agent else ("", "")
    return (template_text(name).replace("@PYTHON@", python).replace("@CONFIG@", config).replace("@ENV@", env)
            .replace("@SITE@", _site_expression(python, site)).replace("@DOOR@", door)
            .replace("@PIDFILE@", pid_file).replace("@SLURM_CONF_ARG@", f" {slurm_conf}" if slurm_conf else "")
            .replace("@AGENT@", f', "--agent", "{agent}"' if agent else ""))


def python_part(hook: str) -> str:
    """The Python a rendered hook runs when the agent does not take it at its door (``exec PYTHON -IS -c
    '...' "$hook" "$t0"``): the Python client, which tries the agent's socket, then runs the hook itself."""
    start = hook.rindex(" -IS -c '\n") + len(" -IS -c '")
    return hook[start:hook.rindex("\n' \"$hook\" \"$t0\"\n") + 1]


def render_unit(python: str = DEFAULT_PYTHON, config: str = DEFAULT_CONFIG, socket: str = DEFAULT_SOCKET) -> str:
    """The systemd unit of the warm agent (``healthcheck-agent.service``)."""
    _check_paths((python, "python"), (config, "config"), (socket, "agent socket"))
    return template_text(UNIT).replace("@PYTHON@", python).replace("@CONFIG@", config).replace("@SOCKET@", socket)


def _write(prefix: str | Path, texts: dict[str, str]) -> list[Path]:
    out = Path(prefix)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        target = out / name
        partial = out / f".{name}.{os.getpid()}.partial"
        mode = 0o755 if name in HOOKS else 0o644  # the hooks run; the unit file is read by systemd
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fchmod(fh.fileno(), mode)  # whatever the umask
                os.fsync(fh.fileno())
            os.replace(partial, target)
        except BaseException:
            try:
                os.unlink(partial)
            except OSError:
                pass
            raise
        written.append(target)
    return written


def install_hooks(prefix: str, config: str, python: str | None = None,
                  slurm_conf: str | None = None, agent: str | None = DEFAULT_SOCKET) -> list[Path]:
    """Write the three hooks into ``prefix``, executable, and the agent's systemd unit beside them (unless
    ``agent`` is None: hooks that never try an agent). ``slurm_conf``: a slurm.conf outside the default
    place (exported as SLURM_CONF for the scontrol calls the hooks make)."""
    python = os.path.abspath(python or sys.executable)
    config = os.path.abspath(config)
    slurm_conf = os.path.abspath(slurm_conf) if slurm_conf else None
    agent = os.path.abspath(agent) if agent else None
    if agent:
        check_agent_dir(agent)
    site = package_path(python)
    texts = {name: render(name, python, config, slurm_conf, agent, site) for name in HOOKS}
    if agent:
        texts[UNIT] = render_unit(python, config, agent)
    return _write(prefix, texts)


class UnsafeAgentDir(PermissionError):
    """The agent's directory could be written by someone other than root: refused at install."""


def check_agent_dir(socket_path: str) -> None:
    """Refuse an agent socket whose directory anyone but root (or, not run as root, this user) could
    write: whoever can write there can plant the door, the pid file or the socket the root hooks use.
    An existing directory must be owned by root and not writable by group or others, and so must every
    directory above it (a sticky one such as /tmp above it is accepted: no one else can rename it); a
    directory still to be made (the agent makes it 0700) must have a parent no one else can write,
    sticky or not (in /tmp anyone could make it first)."""
    import stat

    owners = (0, os.geteuid())
    directory = os.path.dirname(os.path.abspath(socket_path))
    if os.path.isdir(directory):
        st = os.stat(directory)
        if st.st_uid not in owners or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeAgentDir(f"agent directory {directory} (owner uid {st.st_uid}, mode "
                                 f"{stat.S_IMODE(st.st_mode):o}) must belong to root and not be writable by "
                                 f"group or others (fix: chown root:root {directory}; chmod 0700 {directory})")
        above = directory
    else:
        above = os.path.dirname(directory)
        while not os.path.isdir(above):
            above = os.path.dirname(above)
        st = os.stat(above)
        if st.st_uid not in owners or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeAgentDir(f"agent directory {directory} would be made in {above}, which others can "
                                 f"write (mode {stat.S_IMODE(st.st_mode):o}): anyone could make it first; "
                                 "choose an agent socket under a root-only directory such as /run/healthcheck")
    if os.geteuid() == 0:
        from ..safeio.trust import check_trusted

        check_trusted(above, "agent directory")  # root's all the way up (UntrustedFile is a PermissionError)


def write_shipped(directory: str | Path) -> list[Path]:
    """(Re)write the default-layout hooks and agent unit committed in ``prolog_epilog/``."""
    return _write(directory, {**{name: render(name) for name in HOOKS}, UNIT: render_unit()})


SYSTEMD_DIR = "/etc/systemd/system"
SYSTEMCTL_TIMEOUT_S = 60.0


def systemd_running() -> bool:
    """Root on a machine systemd runs (its runtime directory exists, as ``deb-systemd-invoke`` checks):
    ``install-hooks`` then enables the agent's unit unless told not to."""
    return os.geteuid() == 0 and os.path.isdir("/run/systemd/system")


class AgentNotEnabled(RuntimeError):
    """The agent's unit could not be installed or started (no systemd, systemctl failed)."""


def enable_agent(prefix: str, systemd_dir: str = SYSTEMD_DIR, run=None) -> list[str]:
    """Install the agent's unit written beside the hooks in ``prefix`` into ``systemd_dir``, enable it and
    (re)start it: ``systemctl daemon-reload``, ``enable``, ``restart`` (a re-install may change its
    config or socket; a restart lets busy hooks finish, ``KillMode=process``). ``run``: the subprocess
    seam (:func:`healthcheck.safeio.subproc.run`). Returns what was done, one line each; raises
    AgentNotEnabled (the hooks then run themselves: they work without the agent)."""
    from ..safeio.atomic import atomic_write
    from ..safeio import subproc

    run = run or subproc.run
    source = os.path.join(os.path.abspath(prefix), UNIT)
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
        target = os.path.join(systemd_dir, UNIT)
        atomic_write(target, text, 0o644)
    except OSError as exc:
        raise AgentNotEnabled(f"the agent's unit not installed: {exc}") from exc
    done = [f"installed {target}"]
    for args in (["daemon-reload"], ["enable", UNIT], ["restart", UNIT]):
        try:
            res = run(["systemctl", *args], timeout=SYSTEMCTL_TIMEOUT_S)
        except FileNotFoundError as exc:  # subproc.ToolNotFound: no systemd on this machine
            raise AgentNotEnabled(f"{exc}: start the agent another way ({_agent_command(text)})") from exc
        if res.timed_out or res.returncode != 0:
            why = "timed out" if res.timed_out else f"exit {res.returncode}"
            raise AgentNotEnabled(f"systemctl {' '.join(args)}: {why}: {(res.stderr or res.stdout).strip()[:500]}")
        done.append(f"systemctl {' '.join(args)}")
    return done


def _agent_command(unit_text: str) -> str:
    for line in unit_text.splitlines():
        if line.startswith("ExecStart="):
            return line[len("ExecStart="):]
    return "python -I -m healthcheck.agent.main"


def agent_lines(prefix: str) -> str:
    """How to start the agent the hooks try first (a systemd unit written beside them)."""
    unit = os.path.join(os.path.abspath(prefix), UNIT)
    return (f"# the warm agent (optional: without it each hook runs in its own process); --enable-agent does this:\n"
            f"#   cp {unit} /etc/systemd/system/ && systemctl daemon-reload && systemctl enable --now {UNIT}\n")


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


if __name__ == "__main__":  # python -m healthcheck.deploy.install DIR: regenerate prolog_epilog/
    if len(sys.argv) != 2:
        sys.exit("usage: python -m healthcheck.deploy.install DIRECTORY  (writes the default-layout hooks)")
    for path in write_shipped(sys.argv[1]):
        print(f"wrote {path}", file=sys.stderr)
