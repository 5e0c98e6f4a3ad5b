"""Where the node's agent lives: its socket, and the door and pid file beside it.

The one place the hook (which knocks), the agent (which opens them) and ``deploy`` (which renders the hooks
and the agent's unit naming them) agree on the layout; it imports nothing, so every layer may use it
without reaching the hook or the agent (issue 31: burn-in, sweep and drill reach neither)."""

DEFAULT_SOCKET = "/run/healthcheck/agent.sock"


def paths_for(socket_path: str) -> tuple[str, str]:
    """The door and the pid file of the agent whose socket is ``socket_path``."""
    base = socket_path[:-5] if socket_path.endswith(".sock") else socket_path
    return base + ".door", base + ".pid"
