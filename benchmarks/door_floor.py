"""The door's floor, for benchmarks/bench_prolog.py: what a hook at the agent's door costs before any
check runs. A stand-in for the agent opens a door as the agent does (``door.open_door``) and answers
each request line at once, with the package's own parser and reply (``door.parse_request``,
``door.Reply``: the pipe checked as the agent's worker checks it): ``accepted``, then ``done 0``.
Nothing is probed, judged or written, so the installed prolog hook knocking at it costs bash's start,
the knock and one hand-over: the least any design that takes the hook's work at the door can cost, set
against NHC's wall time. Not part of the test run.

    python benchmarks/door_floor.py SOCKET   (the door and pid file beside SOCKET; runs until killed)
"""
from __future__ import annotations

import os
import select
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from healthcheck.core import agentpaths
from healthcheck.agent import door  # noqa: E402


def _stop(_signum, _frame):
    raise SystemExit(0)


def serve(socket_path: str) -> None:
    signal.signal(signal.SIGTERM, _stop)  # the door and pid file removed on the way out
    door_path, pid_path = agentpaths.paths_for(socket_path)
    os.makedirs(os.path.dirname(door_path), mode=0o700, exist_ok=True)
    fd = door.open_door(door_path, pid_path)
    lines = door.Lines()
    try:
        while True:
            select.select([fd], [], [])
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            for line in lines.feed(data):
                try:
                    req = door.parse_request(line)
                    reply = door.Reply(req.pid, req.fd, shell=req.shell)
                except door.DoorError as exc:
                    print(f"door floor: {exc}", file=sys.stderr)
                    continue
                try:
                    reply.send({"kind": "accepted", "wait_s": 1.0, "pid": 0})
                    reply.send({"kind": "done", "rc": 0, "log": ""})
                except OSError:
                    pass
                finally:
                    reply.close()
    finally:
        door.close_door(fd, door_path, pid_path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.splitlines()[-1].strip())
    try:
        serve(sys.argv[1])
    except KeyboardInterrupt:
        pass
