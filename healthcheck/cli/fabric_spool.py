"""`--spool DIR` of the fabric commands (`fabric check`, `fabric node`, `fabric consistency`): the
result recorded as one spool run record, context fabric (healthcheck/fabric/runrecord.py)."""
from __future__ import annotations

import click

SPOOL = click.option("--spool", "spool_dir", type=click.Path(file_okay=False),
                     help="Also record the result in this spool directory (context fabric; "
                          "`healthcheck history ingest` stores it).")


def spool_result(spool_dir: str | None, findings, node: str | None, started: str, t0: float) -> None:
    """Append the command's findings to ``spool_dir`` as one run record (fabric/runrecord.py); a spool that
    cannot be written is a warning, as for `healthcheck check --spool`: the result printed stands."""
    if not spool_dir:
        return
    import time

    from ..fabric.runrecord import fabric_record, record_to
    from ..probes.live import short_hostname
    from ..spool.store import SpoolError

    try:
        record_to(spool_dir, fabric_record(findings, node or short_hostname(), started, time.monotonic() - t0))
    except (SpoolError, OSError, ValueError) as exc:
        click.echo(f"warning: result not recorded in {spool_dir}: {exc}", err=True)
