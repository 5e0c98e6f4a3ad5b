"""The expectations file ("commissioning as code"): one TOML file, node classes matched by node-set
patterns, per class what the hardware must look like, thresholds and per-context check lists.

The file must be a regular file (a FIFO or device at the path is refused unread, never waited on) of
at most MAX_CONFIG_BYTES (4 MiB; real ones are a few KiB), nesting at most MAX_CONFIG_DEPTH (32) tables
and arrays; every number of the schema is finite and in its documented range (config_schema._RANGES).
Errors name the file and line (``ConfigError.__str__`` -> ``"path:12: message"``). Matching: the first
``[class.NAME]`` whose ``nodes`` pattern contains the node wins; ``[defaults]`` applies to every node and
each class overrides it key by key (tables such as thresholds, versions and pcie merge one level deep).
"""
from __future__ import annotations

from .record import record as dataclass, field
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401

from .expectations import Expectations, PcieExpect, gpu_model_expectations, ib_port_expectations
from .slurm.settings import SlurmSettings

MAX_CONFIG_BYTES = 4 << 20  # = safety.MAX_TRUSTED_FILE_BYTES; a bigger config is refused before it is read
MAX_CONFIG_DEPTH = 32       # tables and arrays nest about 4 deep in a real config


class ConfigError(ValueError):
    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message, self.path, self.line = message, path, line

    def __str__(self) -> str:
        where = self.path or "<config>"
        return f"{where}:{self.line}: {self.message}" if self.line else f"{where}: {self.message}"


@dataclass
class NodeClass:
    name: str
    nodes: str
    settings: dict[str, Any]
    _nodeset: Any = None

    def matches(self, node: str) -> bool:
        if self._nodeset is None:
            from ClusterShell.NodeSet import NodeSet

            self._nodeset = NodeSet(self.nodes)
        return node in self._nodeset


@dataclass
class Config:
    path: str | None
    defaults: dict[str, Any] = field(default_factory=dict)
    classes: list[NodeClass] = field(default_factory=list)
    xid: dict[str, dict[str, Any]] = field(default_factory=dict)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    history_db_url: str | None = None  # [history] db_url
    burnin: dict[str, Any] = field(default_factory=dict)  # [burnin], validated (healthcheck/burnin/settings.py)
    sweep: dict[str, Any] = field(default_factory=dict)  # [sweep], validated (healthcheck/sweep/settings.py)
    topology: dict[str, Any] = field(default_factory=dict)  # [topology.LEVEL] GROUP = nodeset (topology.py)

    def node_class(self, node: str) -> NodeClass | None:
        return next((c for c in self.classes if c.matches(node)), None)

    def effective(self, node: str) -> tuple[str | None, dict[str, Any]]:
        """The merged settings for ``node`` (defaults overlaid by its class)."""
        cls = self.node_class(node)
        merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.defaults.items()}
        if cls is not None:
            for key, value in cls.settings.items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = {**merged[key], **value}
                else:
                    merged[key] = value
        return (cls.name if cls else None), merged

    def expectations_for(self, node: str) -> Expectations:
        name, s = self.effective(node)
        from .xid_policy import load_xid_policy

        try:
            policy = load_xid_policy(overrides=self.xid or None)
        except ValueError as exc:
            raise ConfigError(f"[xid]: {exc}", self.path) from exc
        return build_expectations(name, s, policy)


def build_expectations(name: str | None, s: dict[str, Any], policy) -> Expectations:
    ib = s.get("ib", {})
    cpu = s.get("cpu", {})
    pcie = s.get("pcie", {})
    by_kind = {k: PcieExpect(v.get("gen"), v.get("width")) for k, v in pcie.items() if ":" not in k}
    by_addr = {k.lower(): PcieExpect(v.get("gen"), v.get("width")) for k, v in pcie.items() if ":" in k}
    return Expectations(
        node_class=name,
        gpu_count=s.get("gpu_count"),
        gpu_model=s.get("gpu_model"),
        gpu_models=gpu_model_expectations(s.get("gpu_models")),
        nvlinks_per_gpu=s.get("nvlinks_per_gpu"),
        nvme_count=s.get("nvme_count"),
        pcie_by_kind=by_kind,
        pcie_by_address=by_addr,
        ib_port_count=ib.get("ports"),
        ib_rate_gbps=ib.get("rate_gbps"),
        ib_link_layer=ib.get("link_layer"),
        ib_devices=tuple(ib["devices"]) if "devices" in ib else None,
        hca_firmware=ib.get("firmware"),
        ib_per_port=ib_port_expectations(ib.get("per_port")),
        versions={k: str(v) for k, v in s.get("versions", {}).items()},
        services=tuple(s.get("services", ())),
        mounts=tuple(s.get("mounts", ())),
        ro_mounts=tuple(s.get("ro_mounts", ())),
        cpu_sockets=cpu.get("sockets"),
        cpu_cores=cpu.get("cores"),
        cpu_threads=cpu.get("threads"),
        mem_total_gib=s.get("mem_total_gib"),
        thresholds={k: dict(v) for k, v in s.get("thresholds", {}).items()},
        bundle=s.get("bundle"),
        sysfs_root=s.get("sysfs_root", "/sys"),
        proc_root=s.get("proc_root", "/proc"),
        checks={k: tuple(v) for k, v in s.get("checks", {}).items()},
        xid_policy=policy,
    )


def default_expectations() -> Expectations:
    """What a node is judged against without any config file."""
    from .xid_policy import load_xid_policy

    return build_expectations(None, {}, load_xid_policy())


# ------------------------------------------------------------------------------------- loading


def load(path: str, use_cache: bool = False) -> Config:
    """Read and validate the expectations file. As root, the file and the directories above it must
    be root's alone (see :mod:`healthcheck.safety`): a refused config judges nothing, drains nothing.
    ``use_cache``: reuse the parsed file from :mod:`healthcheck.tomlcache` (the hooks' hot path)."""
    from .safety import UntrustedFile, check_trusted, running_as_root

    if running_as_root():
        try:
            check_trusted(path, "config")
        except UntrustedFile as exc:
            raise ConfigError(str(exc), path) from exc
        except OSError as exc:
            raise ConfigError(f"cannot read config: {exc.strerror or exc}", path) from exc
    if use_cache:
        from . import tomlcache
        from .config_schema import Validator

        data = tomlcache.get(path)
        if data is not None:
            try:
                return Validator("", path).config(data)
            except ConfigError:
                pass  # read it again below, for an error with its line number
    from .safety import NotARegularFile, read_regular

    try:
        raw = read_regular(path, "config", MAX_CONFIG_BYTES)
    except NotARegularFile as exc:
        raise ConfigError(str(exc), path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror or exc}", path) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", path) from exc
    data = _parse(text, path)
    from .config_schema import Validator

    config = Validator(text, path).config(data)
    if use_cache:
        from . import tomlcache

        tomlcache.put(path, data)
    return config


def loads(text: str, path: str | None = None) -> Config:
    from .config_schema import Validator

    return Validator(text, path).config(_parse(text, path))


def _parse(text: str, path: str | None) -> dict[str, Any]:
    import tomllib

    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{len(text)} characters, over the limit of {MAX_CONFIG_BYTES} "
                          f"({MAX_CONFIG_BYTES >> 20} MiB) for a config: refusing to parse it", path)
    try:
        data = tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per level of nested arrays and inline tables
        raise ConfigError(f"nested too deeply (a config nests at most {MAX_CONFIG_DEPTH} levels)", path,
                          _deep_line(text)) from None
    except tomllib.TOMLDecodeError as exc:
        import re  # a parse error: not the hot path

        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(match.group(1)) if match else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ConfigError(f"TOML syntax error: {msg}", path, line) from exc
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ConfigError(f"TOML syntax error: {exc}", path) from None
    if _depth(data) > MAX_CONFIG_DEPTH:
        raise ConfigError(f"nested too deeply (a config nests at most {MAX_CONFIG_DEPTH} levels)", path,
                          _deep_line(text))
    return data


def _depth(data: Any) -> int:
    """How deeply ``data`` nests tables and arrays (iterative: deep data must not recurse here)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > MAX_CONFIG_DEPTH:
                break
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((v, level + 1) for v in children if isinstance(v, (dict, list)))
    return deepest


def _deep_line(text: str) -> int | None:
    """The first line that opens more than MAX_CONFIG_DEPTH brackets or braces (best effort)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.count("[") + line.count("{") > MAX_CONFIG_DEPTH:
            return number
    return None


def overlapping_classes(cfg: Config) -> list[tuple[str, str, str]]:
    """Pairs of classes whose node sets intersect (the first one in the file wins): (a, b, sample)."""
    from ClusterShell.NodeSet import NodeSet

    sets = [(c.name, NodeSet(c.nodes)) for c in cfg.classes]
    out = []
    for i, (a, sa) in enumerate(sets):
        for b, sb in sets[i + 1:]:
            both = sa & sb
            if len(both):
                out.append((a, b, str(both)))
    return out


def site_db_url(config_path: str | None = None) -> str | None:
    """The history database URL of the site config (``[history] db_url``): the file named, else
    $HEALTHCHECK_CONFIG, else /etc/healthcheck/healthcheck.toml when it exists; None without one."""
    import os

    path = config_path or os.environ.get("HEALTHCHECK_CONFIG")
    if path is None and os.path.exists("/etc/healthcheck/healthcheck.toml"):
        path = "/etc/healthcheck/healthcheck.toml"
    return load(path).history_db_url if path else None
