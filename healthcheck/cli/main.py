"""The `healthcheck` command: the group, its commands registered from one module per command group, and
the console entry point. A thin shell over the library; heavy imports stay inside the commands.

Exit status: one table for every command (healthcheck.core.exitcodes; README "Exit status"; `man healthcheck`).
"""
from __future__ import annotations

import os
import sys

import click

from ..core import exitcodes


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="healthcheck")
@click.option("--no-color", is_flag=True, help="No colours in the output (also: the NO_COLOR environment "
              "variable, set and not empty; output to a pipe or file never has them).")
@click.pass_context
def cli(ctx, no_color):
    """Health checks, bundles and expectations for GPU nodes of a Slurm cluster.

    \b
    Example:
      healthcheck check                      # judge this node with live probes
      healthcheck check --bundle node7.tar.gz --format json
    """
    ctx.meta["healthcheck.no_color"] = no_color



def _register() -> None:
    """One module per command group; each imports click and .common at module level only (pandas and
    SQLAlchemy load inside the commands), so the group is cheap to build."""
    from . import burnin_jobs  # noqa: F401 - registers burnin report/submit/fleet-digests on the burnin group
    from .burnin import burnin
    from .check import check, checks_cmd, collect
    from .config_cmd import config
    from .drill import drill
    from .fabric import fabric
    from .history import db, history
    from .job import job
    from .parse import parse
    from .report import report
    from .slurm import slurm
    from .sweep import sweep

    for command in (check, collect, config, checks_cmd, history, db, report, slurm, burnin, parse, sweep, fabric,
                    drill, job):
        cli.add_command(command)
    _needs_extras(cli)


def _needs_extras(group: click.Group, path: tuple[str, ...] = ()) -> None:
    """Each command that needs an optional extra (healthcheck.core.extras.COMMANDS) first says so, naming the
    pip line (exit 2), instead of failing on an import deep inside; --help works without it."""
    import functools

    from ..core.extras import extra_for

    for name, command in group.commands.items():
        where = path + (name,)
        if isinstance(command, click.Group):
            _needs_extras(command, where)
        elif command.callback is not None and extra_for(" ".join(where)):
            command.callback = functools.wraps(command.callback)(_requiring(" ".join(where), command.callback))


def _requiring(command_path: str, callback):
    def call(*args, **kwargs):
        from ..core.extras import MissingExtra, require_for
        from .common import UsageFailure

        try:
            require_for(command_path)
        except MissingExtra as exc:
            raise UsageFailure(str(exc)) from None
        return callback(*args, **kwargs)
    return call


_register()


def main(argv: list[str] | None = None) -> None:
    """The console entry point (``argv`` None: the real command line; tests pass a list)."""
    real = argv is None
    try:
        cli.main(args=argv, prog_name="healthcheck", standalone_mode=True)
    except SystemExit as done:
        if real:
            _leave(done.code)
        raise
    except Exception as exc:  # a bug of ours: say so, exit 3, no traceback unless asked
        if os.environ.get("HEALTHCHECK_DEBUG"):
            raise
        click.echo(f"healthcheck: internal error: {type(exc).__name__}: {exc} "
                   "(set HEALTHCHECK_DEBUG=1 for the traceback)", err=True)
        if real:
            _leave(exitcodes.INTERNAL)
        sys.exit(exitcodes.INTERNAL)


def _leave(code) -> None:
    """A probe thread still stuck in the GPU driver must not hold the process at interpreter
    shutdown: leave at once. Only from the real command line: inside a test runner it would end the
    runner itself."""
    import threading

    from ..probes.bounded import running

    if running() or any(t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


if __name__ == "__main__":
    main()
