"""``healthcheck.1``: the man page, generated from the click commands and the exit-code table, so it
cannot drift from the command line. ``python -m healthcheck.cli.manpage > docs/healthcheck.1``
(tests/cli/test_manpage.py keeps the committed page current); ``man -l docs/healthcheck.1`` reads it."""
from __future__ import annotations

import click

from ..core import exitcodes


def _escape(text: str) -> str:
    """troff: backslashes doubled, a line starting with '.' or a quote made literal."""
    out = []
    for line in text.replace("\\", "\\e").splitlines():
        out.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(out)


def _paragraphs(help_text: str) -> str:
    """click's help text (``\\b`` blocks kept as they are, other paragraphs filled)."""
    out = []
    for block in (help_text or "").strip().split("\n\n"):
        lines = block.splitlines()
        if lines and lines[0].strip() == "\b":
            out.append(".PP\n.nf\n" + _escape("\n".join(line.rstrip() for line in lines[1:])) + "\n.fi")
        else:
            out.append(".PP\n" + _escape(" ".join(line.strip() for line in lines)))
    return "\n".join(out)


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name in sorted(group.commands):
        command = group.commands[name]
        yield path + (name,), command
        if isinstance(command, click.Group):
            yield from _commands(command, path + (name,))


def _metavar(param: click.Parameter, command: click.Command) -> str:
    try:
        return param.make_metavar(click.Context(command))  # click >= 8.2
    except TypeError:
        return param.make_metavar()


def _options(command: click.Command) -> str:
    out = []
    for param in command.params:
        if isinstance(param, click.Option):
            if param.hidden:
                continue
            flags = ", ".join(param.opts + param.secondary_opts)
            meta = "" if param.is_flag else f" {_metavar(param, command)}"
            out.append(f".TP\n.B {_escape(flags)}{_escape(meta)}\n{_escape(param.help or '')}")
        elif isinstance(param, click.Argument):
            out.append(f".TP\n.I {_escape(_metavar(param, command))}\nargument")
    return "\n".join(out)


# The variables the commands read (tests/cli/test_cli_conventions.py keeps this list and the code in step).
ENVIRONMENT = (
    ("HEALTHCHECK_CONFIG", "the expectations file when --config is not given (else /etc/healthcheck/healthcheck.toml)"),
    ("HEALTHCHECK_DEBUG", "set: an internal error prints its traceback instead of one line (exit 3)"),
    ("HEALTHCHECK_CACHE_DIR", "where the parsed config and policies are cached (root's own by default)"),
    ("HEALTHCHECK_SBATCH_DIR", "where `burnin submit` finds its sbatch templates"),
    ("NO_COLOR", "set and not empty: no colours (as --no-color)"),
    ("SLURM_CONF", "the slurm.conf Slurm's commands use (only when root owns it and nobody else can write it)"),
    ("SLURMD_NODENAME", "the node name (slurmd sets it for the hooks; else the short host name)"),
    ("SLURM_JOB_ID", "the job a hook, a burn-in step or `check --spool` runs for"),
)


def render(cli: click.Group, version: str) -> str:
    parts = [
        f'.TH HEALTHCHECK 1 "" "healthcheck {version}" "User Commands"',
        ".SH NAME",
        "healthcheck \\- health checks, burn-in and readiness reports for the GPU nodes of a Slurm cluster",
        ".SH SYNOPSIS",
        ".B healthcheck",
        "[\\fB--no-color\\fR]",
        ".I COMMAND",
        "[\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        _paragraphs(cli.help or ""),
        _options(cli),
        ".SH COMMANDS",
    ]
    for path, command in _commands(cli):
        parts.append(f".SS healthcheck {' '.join(path)}")
        parts.append(_paragraphs(command.help or command.short_help or ""))
        options = _options(command)
        if options:
            parts.append(options)
    parts.append(".SH EXIT STATUS")
    parts.append("Every command uses one table (the Slurm hooks follow Slurm's own contract instead).")
    for code, name, meaning in exitcodes.TABLE:
        parts.append(f".TP\n.B {code}\n{name}: {_escape(meaning)}")
    parts.append(".SH ENVIRONMENT")
    for name, meaning in ENVIRONMENT:
        parts.append(f".TP\n.B {name}\n{_escape(meaning)}")
    parts.append(".SH FILES\n.TP\n.I /etc/healthcheck/healthcheck.toml\nthe expectations file "
                 "(\\fB--config\\fR, \\fB$HEALTHCHECK_CONFIG\\fR)")
    parts.append(".SH SEE ALSO\nREADME.md, docs/ (checks.md, slurm-actions.md, fabric.md, commissioning.md, "
                 "prometheus.md, report.md, deploy.md)")
    return "\n".join(p for p in parts if p) + "\n"


def main() -> None:
    from .. import __version__
    from .main import cli

    click.echo(render(cli, __version__), nl=False)


if __name__ == "__main__":
    main()
