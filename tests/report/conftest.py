"""The history tests' real PostgreSQL server, for the report's database tests (tests/report/test_dbsummary.py)."""
from tests.history.conftest import postgres_server  # noqa: F401 - a fixture
