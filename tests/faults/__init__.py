"""The fault matrix: every fault class the suite must catch, injected and judged (see matrix.py)."""
