"""The history store: run/action records from the node-local spools, in SQLite or PostgreSQL.

- ``db``          where the database is (``--db`` > ``HEALTHCHECK_DB_URL`` > default SQLite file), the
                  password (file or environment, never argv), redaction, engine creation
- ``schema``      SQLAlchemy tables: runs, results, metrics, actions
- ``migrations``  Alembic environment and revisions; ``migrate.upgrade(engine)``, ``migrate.status``
- ``ingest``      spool records -> database, idempotent by run_id / record_id, batched, resumable
- ``rollups``     per-run counts, per-series latest samples, error-counter levels: kept exact by the ingest,
                  rebuilt by ``healthcheck db upgrade`` / ``db rebuild-rollups``; what the report reads
- ``queries``     ``show``, ``export`` (csv, json, parquet), ``load_frames`` (pandas, for the analyses)

Nothing here is imported on the Slurm hooks' path: the hooks only append to the spool.
"""
