"""``python -m healthcheck.checks --write-index``: regenerate the check index (checks/_index.py)."""
import sys

from .registry import write_index

if sys.argv[1:] != ["--write-index"]:
    raise SystemExit("usage: python -m healthcheck.checks --write-index")
print(write_index())
