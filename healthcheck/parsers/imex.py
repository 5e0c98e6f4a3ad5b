"""Pure parsers of ``nvidia-imex-ctl`` (the IMEX daemon's command client, multi-node NVLink; issue 33).

- ``nvidia-imex-ctl -q``: this node's daemon status, one word (``READY``; the daemon's states are
  INITIALIZING, STARTING_AUTH_SERVER, WAITING_FOR_PEERS, WAITING_FOR_RECOVERY, INIT_GPU, READY,
  SHUTTING_DOWN, UNAVAILABLE, as DCGM's ``DCGM_FI_IMEX_DAEMON_STATUS`` lists them).
  :func:`parse_imex_query` takes the first line that is one of them, so a capture of several commands
  (``-q`` then ``-N`` then ``-s``, the corpus's) reads too.
- ``nvidia-imex-ctl -N -j``: the domain as JSON: ``{"status": "UP", "timestamp": ..., "nodes": {"0":
  {"status": "READY", "host": "10.0.0.1", "hostName": ..., "version": ..., "connections": {"1": {"host":
  ..., "status": "CONNECTED"}}}}}``; and the formatted ``-N`` (``Node #0 - 10.136.206.48 - READY``, the
  ``Nodes From\\To`` matrix of letters C/N/R/D/A/I, ``Domain State: UP``). :func:`parse_imex_domain`
  reads either into (domain status, peers).

ParseError only; bounded (MAX_INPUT_CHARS, MAX_PEERS).
"""
from __future__ import annotations

import json
import re

from ..core.model import ImexPeer
from . import ParseError, check_size

MAX_INPUT_CHARS = 4 * 1024 * 1024  # -N -j of a 1,000-node domain with every connection is ~1 MB
MAX_PEERS = 4096

DAEMON_STATES = ("INITIALIZING", "STARTING_AUTH_SERVER", "WAITING_FOR_PEERS", "WAITING_FOR_RECOVERY", "INIT_GPU",
                 "READY", "SHUTTING_DOWN", "UNAVAILABLE")
# the formatted table's legend (nvidia-imex-ctl -N): letter -> the JSON's connection status
CONNECTION_LETTERS = {"C": "CONNECTED", "N": "NEVER_CONNECTED", "R": "RECOVERING", "D": "DISCONNECTED",
                      "A": "AUTHENTICATING", "I": "INVALID"}

_NODE_LINE = re.compile(r"^Node #(?P<index>\d{1,5})\s{0,40}-\s{0,40}(?P<host>\S{1,255})\s{0,40}-\s{0,40}"
                        r"(?P<status>[A-Z_]{1,40})\s*$")
_MATRIX_HEAD = re.compile(r"^\s*Nodes From\\To\s+(?P<cols>[\d ]{1,30000})$")
_MATRIX_ROW = re.compile(r"^\s*(?P<index>\d{1,5})\s+(?P<cells>[A-Z ]{1,30000})$")
_DOMAIN = re.compile(r"^Domain State:\s{0,40}(?P<state>[A-Z_]{1,40})\s*$")


def parse_imex_query(text: str) -> str:
    """The daemon status ``nvidia-imex-ctl -q`` printed (the first line that is a daemon state)."""
    _check(text, "nvidia-imex-ctl -q")
    for line in text.splitlines():
        word = line.strip()
        if word in DAEMON_STATES:
            return word
    raise ParseError("nvidia-imex-ctl -q: no daemon status (READY, WAITING_FOR_PEERS, ...) in the output")


def parse_imex_domain(text: str) -> tuple[str | None, list[ImexPeer]]:
    """(domain status, peers) of ``nvidia-imex-ctl -N -j`` (JSON) or of the formatted ``-N``."""
    _check(text, "nvidia-imex-ctl -N")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _from_json(stripped)
    return _from_text(text)


def _check(text: str, what: str) -> None:
    if not isinstance(text, str):
        raise ParseError(f"{what}: expected text, got {type(text).__name__}")
    check_size(text, what, MAX_INPUT_CHARS)
    if not text.strip():
        raise ParseError(f"{what}: empty output")


def _word(value: object) -> str | None:
    return value.strip().upper() or None if isinstance(value, str) else None


def _from_json(text: str) -> tuple[str | None, list[ImexPeer]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"nvidia-imex-ctl -N -j: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes", {}), dict):
        raise ParseError("nvidia-imex-ctl -N -j: expected an object with 'status' and 'nodes'")
    nodes = data.get("nodes") or {}
    if len(nodes) > MAX_PEERS:
        raise ParseError(f"nvidia-imex-ctl -N -j: {len(nodes)} nodes, more than {MAX_PEERS}")
    peers = []
    for key, node in nodes.items():
        if not str(key).isdigit() or not isinstance(node, dict):
            raise ParseError(f"nvidia-imex-ctl -N -j: node {key!r} is not an indexed object")
        connections = {}
        for peer, conn in (node.get("connections") or {}).items() if isinstance(node.get("connections"), dict) else ():
            status = _word(conn.get("status")) if isinstance(conn, dict) else None
            if str(peer).isdigit() and status:
                connections[str(int(peer))] = status
        host, name = node.get("host"), node.get("hostName")
        peers.append(ImexPeer(int(key), host if isinstance(host, str) else None,
                              name if isinstance(name, str) and name else None, _word(node.get("status")),
                              connections))
    status = _word(data.get("status"))
    if status is None and not peers:
        raise ParseError("nvidia-imex-ctl -N -j: neither a domain status nor nodes")
    return status, sorted(peers, key=lambda p: p.index)


def _from_text(text: str) -> tuple[str | None, list[ImexPeer]]:
    peers: dict[int, ImexPeer] = {}
    columns: list[int] | None = None
    status = None
    for raw in text.splitlines():
        line = raw.rstrip()
        node = _NODE_LINE.match(line.strip())
        if node:
            index = int(node.group("index"))
            peers[index] = ImexPeer(index, node.group("host"), None, node.group("status"))
            if len(peers) > MAX_PEERS:
                raise ParseError(f"nvidia-imex-ctl -N: more than {MAX_PEERS} nodes")
            continue
        head = _MATRIX_HEAD.match(line)
        if head:
            columns = [int(c) for c in head.group("cols").split()]
            continue
        domain = _DOMAIN.match(line.strip())
        if domain:
            status = domain.group("state")
            columns = None
            continue
        row = _MATRIX_ROW.match(line) if columns is not None else None
        if row and int(row.group("index")) in peers:
            cells = row.group("cells").split()
            for column, letter in zip(columns, cells):
                peers[int(row.group("index"))].connections[str(column)] = CONNECTION_LETTERS.get(letter, letter)
    if status is None and not peers:
        raise ParseError("nvidia-imex-ctl -N: no 'Node #' lines and no 'Domain State'")
    return status, [peers[i] for i in sorted(peers)]
