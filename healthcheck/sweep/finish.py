"""After a sweep: its records into the history database, and the readiness report next to its results.
Both are best effort: a database that is down leaves the records spooled for the next ingest."""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone


def ingest_and_report(spool_dir: str, results_dir: str, db_url: str | None, config_path: str | None,
                      log, drift: list[str] | None = None) -> str | None:
    """The report's path, or None when the history could not be reached (said in the log)."""
    from ..cli_report import ReportFailure, load_history, site_view
    from ..config import ConfigError, site_db_url
    from ..history import migrations
    from ..history.db import HistoryError, open_engine
    from ..history.ingest import ingest

    now = datetime.now(timezone.utc)
    try:
        engine = open_engine(db_url or None, None if db_url else site_db_url(config_path))
    except (HistoryError, ConfigError, TypeError) as exc:
        log(f"history unreachable ({exc}): records stay spooled in {spool_dir}")
        return None
    try:
        migrations.require_current(engine, create=True)  # a first sweep creates the schema; a newer one refuses
        log(f"history: {ingest([spool_dir], engine).summary()}")
    except HistoryError as exc:
        log(f"history unreachable ({exc}): records stay spooled in {spool_dir}")
        return None
    finally:
        engine.dispose()
    from ..report import build_report, render_html

    since = now - timedelta(days=30)
    try:
        history = load_history(db_url or site_db_url(config_path), since, now)  # through the rollups
        node_class, topology = site_view(config_path)
    except ReportFailure as exc:
        log(f"readiness report not written: {exc.message}")
        return None
    rep = build_report(history, since, now, node_class=node_class, topology=topology, drift=drift)
    path = os.path.join(results_dir, "report.html")
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(render_html(rep, plots=True))
    os.replace(tmp, path)
    return path
