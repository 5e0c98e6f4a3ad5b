"""After a sweep: its records into the history database, and the readiness report next to its results.
Both are best effort: a database that is down leaves the records spooled for the next ingest."""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone


def write_fleet_digests(results_dir: str, db_url: str | None, config_path: str | None, log) -> str | None:
    """The fleet's majority GEMM digests from the history (last 30 days) into ``results_dir``, for the
    sweep's jobs: a one-node burn-in has no peer nodes to compare with, the fleet is its peer. None (said
    in the log) when the history is unreachable or not migrated: the jobs then compare within the node."""
    from ..burnin.fleetfile import FleetFileError, write
    from ..config import ConfigError, site_db_url
    from ..history import migrations
    from ..history.db import HistoryError, open_engine
    from ..history.digests import fleet_from_history

    now = datetime.now(timezone.utc)
    since = now - timedelta(days=30)
    try:
        engine = open_engine(db_url or None, None if db_url else site_db_url(config_path))
        try:
            migrations.require_current(engine)
            view = fleet_from_history(engine, since)
        finally:
            engine.dispose()
        path = os.path.join(results_dir, "fleet-digests.json")
        n = write(path, {k: v.to_dict() for k, v in view.keys.items()}, now.isoformat(timespec="seconds"),
                  since.isoformat(timespec="seconds"))
    except (HistoryError, ConfigError, FleetFileError, TypeError) as exc:
        log(f"fleet GEMM digests not written ({exc}): each node is compared within itself only")
        return None
    log(f"fleet GEMM digests: {n} decided key(s) in {path}")
    return path


def ingest_and_report(spool_dir: str, results_dir: str, db_url: str | None, config_path: str | None,
                      log, drift: list[str] | None = None) -> str | None:
    """The report's path, or None when the history could not be reached (said in the log)."""
    from ..report.load import ReportInputError, load_history, nvlink_level, site_view
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
    from ..report import build_report

    since = now - timedelta(days=30)
    try:
        history = load_history(db_url or site_db_url(config_path), since, now)  # through the rollups
        node_class, topology, config_hash = site_view(config_path)
        level = nvlink_level(config_path) if topology else ""
    except ReportInputError as exc:
        log(f"readiness report not written: {exc}")
        return None
    try:  # the history's last reads end while the report is built (report.summary.Later)
        rep = build_report(history, since, now, node_class=node_class, topology=topology, drift=drift,
                           nvlink_level=level)
    except ReportInputError as exc:
        log(f"readiness report not written: {exc}")
        return None
    rep.config_hash = config_hash
    path = os.path.join(results_dir, "report.html")
    from ..report.files import write_html

    write_html(rep, path, plots=True)  # the page and its full tables as CSV beside it
    return path
