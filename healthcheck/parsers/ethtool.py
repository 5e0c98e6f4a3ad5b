"""``ethtool -S <if>`` (and any "name: value" counter listing, e.g. mlx5's ``show_counters``) -> counters.

ethtool prints ``NIC statistics:`` then one ``     name: value`` line per counter (the driver's
names: mlx5 ``rx_crc_errors_phy``, bnxt ``[0]: rx_ucast_packets``). Pasted outputs carry more: the
command line and its prompt (``# ethtool -S eth03 | grep ...``), blank lines, notes. What is kept: every
line whose text after its *last* ASCII colon is a non-negative decimal integer, the name being what
comes before it (stripped). Everything else is ignored, so a note with a full-width colon
(``rx_out_of_buffer：``) or a GID (``fe80:0000:...``) is never a counter. A name seen twice keeps its last
value (two ``| grep`` runs of one port). Pure; :class:`ParseError` when the text holds no counter at all.
"""
from __future__ import annotations

from . import ParseError

MAX_NAME = 128
MAX_DIGITS = 24  # a u64 has 20


def parse_ethtool_stats(text: str) -> dict[str, int]:
    if not isinstance(text, str):
        raise ParseError(f"ethtool -S: expected text, got {type(text).__name__}")
    counters: dict[str, int] = {}
    for line in text.splitlines():
        name, colon, value = line.rpartition(":")
        if not colon:
            continue
        name, value = name.strip(), value.strip()
        if not name or len(name) > MAX_NAME or name.startswith(("#", "$")) or " " in name.replace("]: ", "]:"):
            continue
        if not value.isascii() or not value.isdigit() or len(value) > MAX_DIGITS:
            continue
        counters[name] = int(value)
    if not counters:
        head = text.strip().splitlines()[0][:80] if text.strip() else ""
        raise ParseError(f"ethtool -S: no 'name: value' counter line found (first line: {head!r})")
    return counters
