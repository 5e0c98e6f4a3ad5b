"""What the report reads: the window's summary from the history database and the site's view of the
fleet (node classes, topology). Library code shared by ``healthcheck report`` and the nightly sweep;
errors are :class:`ReportInputError` (the CLI maps them to its exit codes)."""
from __future__ import annotations

import os
from datetime import datetime


class ReportInputError(Exception):
    """The report's input could not be read. ``kind``: "config" (a bad site config: a usage error) or
    "history" (the database unreachable or of another schema version)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def load_history(db_url: str | None, since: datetime, now: datetime, empty_is_error: bool = False,
                 recent: int | None = None):
    """The window's ``report.summary.Summary`` from the database (``db_url``, $HEALTHCHECK_DB_URL or the
    default): through the rollups (``report.dbsummary``), or, where they are not built, from every row
    (``load_frames``; slow on a big history) with a note saying how to rebuild them. A database of
    another schema version is refused (``healthcheck db upgrade``). ``empty_is_error``: a window without a
    run or an action raises ``report.window.EmptyWindow`` naming the newest record. ``recent``: the last
    runs per node the fleet ranking judges (``[fleet] persist_n``; None: its default)."""
    from ..config import ConfigError, site_db_url
    from ..history import migrations
    from ..history.db import HistoryError, open_engine
    from .dbsummary import RollupsUnavailable, load_summary

    try:
        engine = open_engine(db_url, None if db_url else site_db_url())
    except (ConfigError, HistoryError) as exc:  # a bad config or a URL refused (e.g. a password in it)
        raise ReportInputError(str(exc), "config") from None
    try:
        if not migrations.is_current(engine):  # the fast check; the full one names the reason
            migrations.require_current(engine)
        try:
            summary = load_summary(engine, since, now, recent=recent)
            summary.wrap_later(_as_input_error)  # the fields still being read fail as the rest of the input
        except RollupsUnavailable as exc:
            from ..history.queries import load_frames
            from .summary import summarize_frames

            summary = summarize_frames(load_frames(engine, since=since), since, now, recent=recent)
            summary.notes.append(str(exc)[:1].upper() + str(exc)[1:] + ".")
            from .dbsummary import first_seen

            summary.first_seen = first_seen(engine, now)  # the whole history's, not the window's
        if empty_is_error:
            from .window import newest_record, require_data

            require_data(summary, newest_record(engine))
        from ..history.digests import load_digests

        summary.gemm_digests = load_digests(engine, since, now)
        summary.versions = load_versions(engine, since, now)
        return summary
    except HistoryError as exc:  # already redacted by the store
        raise ReportInputError(str(exc), "history") from None
    finally:
        engine.dispose()


def _as_input_error(read):
    """``read`` with its HistoryError (already redacted) as a ReportInputError, as ``load_history``'s own."""
    def get():
        from ..history.db import HistoryError

        try:
            return read()
        except HistoryError as exc:
            raise ReportInputError(str(exc), "history") from None

    return get


def load_versions(engine, since: datetime, now: datetime):
    """Each node's latest installed versions in the window, from its ``sw.versions`` results
    (analysis/versions.py): one indexed query on the results table (check, started_at)."""
    import pandas as pd
    from sqlalchemy import and_, select

    from ..analysis.versions import CHECK, versions_from_results
    from ..history.schema import results

    query = select(results.c.node, results.c.started_at, results.c["check"], results.c.component,
                   results.c.message).where(and_(results.c["check"] == CHECK, results.c.started_at >= since,
                                                 results.c.started_at <= now))
    with engine.connect() as conn:
        rows = conn.execute(query).fetchall()
    frame = pd.DataFrame(rows, columns=["node", "started_at", "check", "component", "message"])
    return versions_from_results(frame)


def _site_config(config_path: str | None):
    """The site config (``config_path`` or $HEALTHCHECK_CONFIG), or None without one (each view below reads
    it: about 17 ms for a 10,000-node topology). A bad file: ReportInputError ("config")."""
    path = config_path or os.environ.get("HEALTHCHECK_CONFIG")
    if not path:
        return None
    from ..config import ConfigError, load

    try:
        return load(path)
    except (ConfigError, ValueError) as exc:
        raise ReportInputError(str(exc), "config") from None


def site_view(config_path: str | None):
    """(node -> class name, [topology], config hash) of the site config; (None, None, None) without one."""
    cfg = _site_config(config_path)
    if cfg is None:
        return None, None, None

    def node_class(node: str) -> str | None:
        cls = cfg.node_class(node)
        return cls.name if cls is not None else None

    return node_class, cfg.topology or None, _file_hash(config_path or os.environ["HEALTHCHECK_CONFIG"])


def fleet_settings(config_path: str | None):
    """The ``[fleet]`` settings (``analysis.fleetsettings.FleetSettings``) of the site config (``config_path``
    or $HEALTHCHECK_CONFIG); the defaults without one. A bad section: ReportInputError ("config")."""
    from ..analysis.fleetsettings import FleetSettings

    cfg = _site_config(config_path)
    if cfg is None:
        return FleetSettings()
    from ..config import ConfigError

    try:
        return cfg.section("fleet")
    except (ConfigError, ValueError) as exc:
        raise ReportInputError(str(exc), "config") from None


def nvlink_level(config_path: str | None) -> str:
    """The ``[topology]`` level of the NVLink domains the site declares: ``[slurm] drain_cap_level`` (as
    the drain cap reads them), "" (the default level, ``nvlink``) without a config or that key."""
    cfg = _site_config(config_path)
    return (cfg.slurm.drain_cap_level or "") if cfg is not None else ""


def _file_hash(path: str) -> str | None:
    import hashlib

    from ..safeio.trust import read_regular

    try:
        return hashlib.sha256(read_regular(path, "config")).hexdigest()[:12]
    except OSError:
        return None


def slurm_states():
    """Live node states from slurmctld; (None, note) when Slurm cannot be asked."""
    from ..slurm.backend import SlurmError, SlurmUnreachable, backend_from_name

    try:
        return backend_from_name("auto").nodes(), None
    except (SlurmError, SlurmUnreachable, OSError) as exc:
        return None, f"Slurm could not be asked ({exc}); drain states come from our own records."
