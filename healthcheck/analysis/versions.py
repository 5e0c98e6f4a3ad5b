"""The fleet's installed versions read back from the history: the latest ``sw.versions`` results of each
node (every run of `healthcheck check`, HealthCheckProgram and the burn-in records them, whatever their
status), so the readiness report's version tables and drift rows need no sweep.

``sw.versions`` writes either one finding listing every item (``"driver 550.54.14, cuda 12.4, kernel
6.1.0 (informational: ...)"``: items joined by ", ", several values of one item by "," without a
space) or, with expected versions, one finding per item (component = item, message ``"driver
550.54.14"``, ``"driver 535.1 (expected 550.*)"`` or ``"driver not found (expected 550.*)"``).
Pure: frames in, frames out.
"""
from __future__ import annotations

import pandas as pd

CHECK = "sw.versions"
COLUMNS = ["node", "item", "value"]


def versions_from_results(results: pd.DataFrame | None) -> pd.DataFrame:
    """(node, item, value) of each node's latest run holding ``sw.versions`` results. ``results``:
    columns node, started_at, check, component, message (other checks are ignored)."""
    if results is None or results.empty:
        return pd.DataFrame(columns=COLUMNS, dtype=object)
    df = results[results["check"] == CHECK]
    if df.empty:
        return pd.DataFrame(columns=COLUMNS, dtype=object)
    latest = df.groupby("node")["started_at"].transform("max")
    df = df[df["started_at"] == latest]
    rows: list[tuple[str, str, str]] = []
    for node, component, message in zip(df["node"], df["component"], df["message"]):
        rows.extend((str(node), item, value) for item, value in parse_message(component, message))
    out = pd.DataFrame(rows, columns=COLUMNS, dtype=object)
    return out.drop_duplicates(["node", "item"], keep="last").sort_values(["node", "item"], ignore_index=True)


def parse_message(component, message) -> list[tuple[str, str]]:
    """The (item, value) pairs of one ``sw.versions`` finding; [] when it names none (``not found``,
    ``no versions found``)."""
    text = "" if message is None else str(message)
    if isinstance(component, str) and component:  # one item per finding
        rest = text[len(component):].strip() if text.startswith(component + " ") else ""
        value = rest.split(" (expected", 1)[0].strip()
        return [] if not value or value.startswith("not found") else [(component, value)]
    listing = text.split(" (informational", 1)[0]
    pairs = []
    for part in listing.split(", "):
        item, _, value = part.strip().partition(" ")
        if item and value and item != "no":
            pairs.append((item, value.strip()))
    return pairs
