"""Validation of the expectations file: every key, type and reference checked, errors with file:line.

:class:`Validator` turns the parsed file into a :class:`~healthcheck.config.model.Config`: the node
classes and ``[xid]`` here, every other section through its subsystem's validator
(:mod:`healthcheck.config.sections`), their errors turned into ``ConfigError`` at the key's line.
Every number of the schema is finite and in its documented range (``_RANGES``).
"""
from __future__ import annotations

import math
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401
from ..checks.registry import CONTEXTS, index, matches
from ..core.lazyre import Pattern
from .slurm_settings import SlurmSettings, validate as validate_slurm
from .topology import MAX_GROUP_NODES, nodeset_size_bound
from ..policies.xid import load_xid_policy
from .model import Config, ConfigError, NodeClass
from .sections import SECTION_ERRORS, SECTIONS, TOP_LEVEL, Section, SectionError, children, section_message

# A class names at most MAX_CLASS_NODES nodes (as a [topology] group), the classes of a file at most
# MAX_CONFIG_NODES in all: the overlap check holds every node once (config/model.py).
MAX_CLASS_NODES = MAX_GROUP_NODES
MAX_CONFIG_NODES = 10 * MAX_GROUP_NODES

# compiled on first use: the hooks load the config (from its cache) before every job
_HEADER = Pattern(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = Pattern(r'^["\']?([^"\'=\s]+)["\']?\s*=')
_URL_PASSWORD = Pattern(r"^[a-z0-9+]+://[^/@:]*:[^/@]*@")
_PORT_KEY = Pattern(r"[A-Za-z0-9_.-]+:[0-9]+")
_PCI_ADDRESS = Pattern(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")

# key -> (type checker, description) for the keys allowed in [defaults] and [class.NAME]
_SCALARS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "nodes": (str, "node-set pattern, e.g. gpu[001-128]"),
    "gpu_count": (int, "number of GPUs"),
    "nvme_count": (int, "number of NVMe controllers (storage.count)"),
    "gpu_model": (str, "substring of the GPU name"),
    "nvlinks_per_gpu": (int, "active NVLinks per GPU"),
    "mem_total_gib": ((int, float), "installed memory in GiB"),
    "services": (list, "process names that must be running"),
    "mounts": (list, "mount points that must be present"),
    "ro_mounts": (list, "mount points that are expected read-only"),
    "bundle": (str, "read this node's hardware from a bundle: a path with {node}, e.g. /srv/bundles/{node}"),
    "sysfs_root": (str, "where the host's /sys is mounted (containers: e.g. /host/sys)"),
    "proc_root": (str, "where the host's /proc is mounted (containers: e.g. /host/proc)"),
    "gpudirect": (bool, "true: the class uses GPUDirect RDMA (the gpudirect.* checks FAIL where it is not ready)"),
}
_TABLES = ("cpu", "pcie", "ib", "versions", "thresholds", "checks", "gpu_models", "nvlink_domain")
# Every number is finite and inside its range (NaN compares false: `max_volatile = nan` would pass
# every GPU); the ranges are far beyond any real node, they only refuse nonsense.
_RANGES: dict[str, tuple[float, float]] = {
    "gpu_count": (0, 1024), "nvme_count": (0, 1024), "nvlinks_per_gpu": (0, 64), "mem_total_gib": (0, 1 << 20),
    "sockets": (0, 1024), "cores": (0, 1 << 20), "threads": (0, 1 << 20), "ports": (0, 1024),
    "gen": (0, 16), "width": (0, 64), "rate_gbps": (0, 100_000), "count": (0, 1024), "nvlinks": (0, 64),
    "size": (1, 1 << 16),
}
THRESHOLD_RANGE = (0, 10 ** 12)  # every numeric threshold (counts, fractions, degrees, watts)
_XID_RANGES = {"window_s": (0, 10 * 366 * 86400), "min_count": (1, 1_000_000)}
_CPU_KEYS = ("sockets", "cores", "threads")
_IB_KEYS = ("ports", "rate_gbps", "link_layer", "devices", "firmware", "per_port")
_IB_PORT_KEYS = ("ca_type", "firmware", "rate_gbps", "link_layer", "active")
_GPU_MODEL_KEYS = ("count", "nvlinks")
_NVLINK_DOMAIN_KEYS = ("size", "name")
_PCIE_KEYS = ("gen", "width")
_VERSION_KEYS = ("driver", "cuda", "nccl", "ofed", "rdma_core", "kernel", "vbios", "hca_firmware", "mlx5_core")
_XID_KEYS = ("action", "window_s", "min_count", "name")


class Validator:
    """``defer``: validate only the sections the hooks read (``Section.hot``) and keep the others' raw
    tables in ``Config.deferred``, validated when asked for (:meth:`Config.section`)."""

    def __init__(self, text: str, path: str | None, defer: bool = False):
        self.lines = text.splitlines()
        self.path = path
        self.defer = defer

    def error(self, message: str, table: str, key: str | None = None) -> ConfigError:
        return ConfigError(message, self.path, self._locate(table, key))

    def _locate(self, table: str, key: str | None) -> int | None:
        """Line of ``key`` inside ``[table]`` (else the first line setting it as a dotted key or in an
        inline table, else the table's header) — best effort for messages."""
        if key is not None:
            line = self._in_table(table, key)
            if line is not None:
                return line
            import re  # error messages only

            pattern = rf'(^|[{{,.])\s*["\']?{re.escape(key)}["\']?\s*='
            for number, line in enumerate(self.lines, 1):
                if re.search(pattern, line):
                    return number
        return self._header(key if not table and key is not None else table)  # a top-level key: [key]

    def _header(self, table: str) -> int | None:
        """Line of the ``[table]`` header, else of its first sub-table's (``[table.sub]``), or None."""
        want = _norm_table(table)
        first_sub = None
        for number, line in enumerate(self.lines, 1):
            header = _HEADER.match(line.strip())
            name = _norm_table(header.group(1)) if header else None
            if name == want:
                return number
            if first_sub is None and name is not None and name.startswith(want + "."):
                first_sub = number
        return first_sub

    def _in_table(self, table: str, key: str) -> int | None:
        """Line of ``key = ...`` written inside the ``[table]`` header's body, or None."""
        want, current = _norm_table(table), ""
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            header = _HEADER.match(stripped)
            if header:
                current = _norm_table(header.group(1))
            elif current == want:
                kv = _KEY.match(stripped)
                if kv and kv.group(1) == key:
                    return number
        return None

    def config(self, data: dict[str, Any]) -> Config:
        unknown = [key for key in data if key not in TOP_LEVEL]
        if unknown:
            key = sorted(unknown)[0]
            expected = ", ".join(["[defaults]", "[class.NAME]", "[xid]", *(f"[{name}]" for name in SECTIONS)])
            raise self.error(f"unknown top-level key {key!r} (expected {expected})", "", key)
        if not isinstance(data.get("defaults", {}), dict):
            raise self.error("[defaults] must be a table", "", "defaults")
        sections, deferred = self.sections(data)
        defaults = self.settings(data.get("defaults", {}), "defaults", allow_nodes=False)
        classes = []
        class_nodes = 0  # the nodes of the classes so far (each refused over MAX_CLASS_NODES before it is built)
        raw_classes = data.get("class", {})
        if not isinstance(raw_classes, dict):
            raise self.error("[class] must be a table of [class.NAME] tables", "class")
        for name, body in raw_classes.items():
            table = f"class.{name}"
            if not isinstance(body, dict):
                raise self.error(f"[{table}] must be a table", table)
            settings = self.settings(body, table, allow_nodes=True)
            if "nodes" not in settings:
                raise self.error(f"[{table}] needs nodes = \"pattern\"", table)
            nodes = settings.pop("nodes")
            class_nodes += self.check_nodeset(nodes, table)
            if class_nodes > MAX_CONFIG_NODES:
                raise self.error(f"the node classes name {class_nodes:,} nodes in all up to [{table}], over the "
                                 f"limit of {MAX_CONFIG_NODES:,} for one file", table, "nodes")
            classes.append(NodeClass(name, nodes, settings))
        xid = self.xid(data.get("xid", {}))
        slurm = sections.pop("slurm", None) or SlurmSettings()
        return Config(self.path, defaults, classes, xid, slurm, sections, deferred)

    def sections(self, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Every section of the file through its validator: (name -> settings, name -> raw table of
        each section a ``defer`` load leaves for later)."""
        done: dict[str, Any] = {}
        deferred: dict[str, Any] = {}
        for top in TOP_LEVEL[3:]:
            if top not in data:
                continue
            value = data[top]
            if not isinstance(value, dict):
                raise self.error(f"[{top}] must be a table", "", top)
            inner = children(top)
            tables = {f"{top}.{child}": value[child] for child in inner if child in value}
            if top in SECTIONS:
                tables[top] = {k: v for k, v in value.items() if k not in inner} if tables else value
            else:  # a container of sections (e.g. [fabric]): only those
                for key in value:
                    if key not in inner:
                        line = self._header(f"{top}.{key}") or self._in_table(top, key) or self._locate(top, key)
                        raise ConfigError(f"unknown section [{top}.{key}] (expected "
                                          f"{', '.join(f'[{top}.{c}]' for c in inner)})", self.path, line)
            for name, table in tables.items():
                entry = SECTIONS[name]
                if self.defer and not entry.hot:
                    deferred[name] = table
                else:
                    done[name] = self.section(entry, table)
        return done, deferred

    def section(self, entry: Section, table: Any) -> Any:
        """One section through its subsystem's validator; its error at the line of the key it names."""
        try:
            return entry.validator()(table)
        except SECTION_ERRORS as exc:
            path = exc.key.split(".") if isinstance(exc, SectionError) else _named_path(str(exc), table)
            raise ConfigError(section_message(entry.name, exc), self.path,
                              self._locate_path(entry.name, path)) from None

    def _locate_path(self, table: str, path: list[str]) -> int | None:
        """The line of the deepest key of ``path`` set inside ``table`` or its sub-tables, else of the
        last key anywhere (dotted keys, inline tables), else of the table's header."""
        for depth in range(len(path), 0, -1):
            line = self._in_table(".".join([table, *path[:depth - 1]]), path[depth - 1])
            if line is not None:
                return line
        return self._locate(table, path[-1] if path else None)

    def check_nodeset(self, pattern: str, table: str) -> int:
        """The number of nodes ``pattern`` names; a pattern over MAX_CLASS_NODES nodes is refused from its
        bracket ranges before ClusterShell builds a name (``gpu[1-99999999]``: gigabytes)."""
        from ClusterShell.NodeSet import NodeSet, NodeSetParseError  # lazy: only a file with node classes
        from ClusterShell.RangeSet import RangeSetParseError

        bound = nodeset_size_bound(pattern, MAX_CLASS_NODES)
        if bound > MAX_CLASS_NODES:
            raise self.error(f"node-set pattern {pattern[:80]!r} names {bound:,} nodes, over the limit of "
                             f"{MAX_CLASS_NODES:,} for a class", table, "nodes")
        try:
            return len(NodeSet(pattern))
        except (NodeSetParseError, RangeSetParseError) as exc:
            raise self.error(f"bad node-set pattern {pattern!r}: {exc}", table, "nodes") from exc

    def settings(self, body: dict[str, Any], table: str, allow_nodes: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in body.items():
            if key in _SCALARS:
                if key == "nodes" and not allow_nodes:
                    raise self.error("nodes = belongs in a [class.NAME] table", table, key)
                kind, what = _SCALARS[key]
                if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                    raise self.error(f"{key} must be {_kind_name(kind)} ({what}), got {value!r}", table, key)
                if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                    raise self.error(f"{key} must be a list of strings", table, key)
                if isinstance(value, (int, float)) and (problem := _range_problem(key, value)):
                    raise self.error(f"{key} {problem}", table, key)
                out[key] = value
            elif key in _TABLES:
                if not isinstance(value, dict):
                    raise self.error(f"{key} must be a table", table, key)
                out[key] = getattr(self, f"table_{key}")(value, f"{table}.{key}")
            else:
                allowed = ", ".join(sorted([*_SCALARS, *_TABLES]))
                raise self.error(f"unknown key {key!r} (allowed: {allowed})", table, key)
        return out

    def _keys(self, value: dict, table: str, allowed: tuple[str, ...]) -> None:
        for key in value:
            if key not in allowed:
                raise self.error(f"unknown key {key!r} in [{table}] (allowed: {', '.join(allowed)})",
                                 table, key)

    def _int(self, value: dict, table: str, key: str) -> None:
        if key in value and (not isinstance(value[key], int) or isinstance(value[key], bool)
                             or value[key] < 0):
            raise self.error(f"{key} must be a non-negative integer, got {value[key]!r}", table, key)
        if key in value and (problem := _range_problem(key, value[key])):
            raise self.error(f"{key} {problem}", table, key)

    def table_cpu(self, value: dict, table: str) -> dict:
        self._keys(value, table, _CPU_KEYS)
        for key in _CPU_KEYS:
            self._int(value, table, key)
        return dict(value)

    def table_ib(self, value: dict, table: str) -> dict:
        self._keys(value, table, _IB_KEYS)
        self._int(value, table, "ports")
        if "rate_gbps" in value and (not isinstance(value["rate_gbps"], (int, float))
                                     or isinstance(value["rate_gbps"], bool)):
            raise self.error("rate_gbps must be a number (e.g. 400)", table, "rate_gbps")
        if "rate_gbps" in value and (problem := _range_problem("rate_gbps", value["rate_gbps"])):
            raise self.error(f"rate_gbps {problem}", table, "rate_gbps")
        if "link_layer" in value and value["link_layer"] not in ("InfiniBand", "Ethernet"):
            raise self.error("link_layer must be \"InfiniBand\" or \"Ethernet\"", table, "link_layer")
        if "devices" in value and not (isinstance(value["devices"], list)
                                       and all(isinstance(d, str) for d in value["devices"])):
            raise self.error("devices must be a list of device names like \"mlx5_0\"", table, "devices")
        if "firmware" in value and not isinstance(value["firmware"], str):
            raise self.error("firmware must be a string", table, "firmware")
        out = dict(value)
        if "per_port" in value:
            out["per_port"] = self.ib_per_port(value["per_port"], f"{table}.per_port")
        return out

    def ib_per_port(self, value: Any, table: str) -> dict:
        """[...ib.per_port] "mlx5_0:1" = { ca_type, firmware, rate_gbps, link_layer, active }."""
        if not isinstance(value, dict):
            raise self.error("per_port must be a table of \"device:port\" = { ... }", table)
        out = {}
        for key, spec in value.items():
            if not _PORT_KEY.fullmatch(str(key)):
                raise self.error(f"per_port key {key!r} must be \"device:port\", e.g. \"mlx5_0:1\"", table, key)
            if not isinstance(spec, dict):
                raise self.error(f"per_port.\"{key}\" must be a table like {{ firmware = \"28.39.1002\", "
                                 "active = true }", table, key)
            for name in spec:
                if name not in _IB_PORT_KEYS:
                    raise self.error(f"unknown key {name!r} in per_port.\"{key}\" (allowed: "
                                     f"{', '.join(_IB_PORT_KEYS)})", table, key)
            for name in ("ca_type", "firmware"):
                if name in spec and not isinstance(spec[name], str):
                    raise self.error(f"per_port.\"{key}\".{name} must be a string", table, key)
            rate = spec.get("rate_gbps")
            if rate is not None and (not isinstance(rate, (int, float)) or isinstance(rate, bool)
                                     or not 0 < rate <= 100_000):  # NaN fails this too
                raise self.error(f"per_port.\"{key}\".rate_gbps must be a positive number (e.g. 400)", table, key)
            if "link_layer" in spec and spec["link_layer"] not in ("InfiniBand", "Ethernet"):
                raise self.error(f"per_port.\"{key}\".link_layer must be \"InfiniBand\" or \"Ethernet\"",
                                 table, key)
            if "active" in spec and not isinstance(spec["active"], bool):
                raise self.error(f"per_port.\"{key}\".active must be true or false", table, key)
            out[str(key)] = dict(spec)
        return out

    def table_gpu_models(self, value: dict, table: str) -> dict:
        """[class.NAME.gpu_models] "NVIDIA H100 80GB HBM3" = { count = 8, nvlinks = 18 }."""
        out = {}
        for model, spec in value.items():
            if not isinstance(spec, dict):
                raise self.error(f"gpu_models.\"{model}\" must be a table like {{ count = 8 }}", table, model)
            self._keys(spec, f"{table}.\"{model}\"", _GPU_MODEL_KEYS)
            for key in _GPU_MODEL_KEYS:
                self._int(spec, f"{table}.\"{model}\"", key)
            out[model] = dict(spec)
        return out

    def table_nvlink_domain(self, value: dict, table: str) -> dict:
        """[class.NAME] nvlink_domain = { size = 72, name = "block" }: a multi-node NVLink domain (issue 33)."""
        self._keys(value, table, _NVLINK_DOMAIN_KEYS)
        self._int(value, table, "size")
        if "name" in value and not isinstance(value["name"], str):
            raise self.error("nvlink_domain.name must be a string (e.g. \"block\")", table, "name")
        return dict(value)

    def table_pcie(self, value: dict, table: str) -> dict:
        out = {}
        for target, spec in value.items():
            sub = f"{table}.{target}"
            if target not in ("gpu", "hca", "nvswitch") and not _PCI_ADDRESS.fullmatch(target):
                raise self.error(f"pcie target {target!r} must be gpu, hca, nvswitch or a PCI address "
                                 "like \"0000:1a:00.0\"", table, target)
            if not isinstance(spec, dict):
                raise self.error(f"pcie.{target} must be a table like {{ gen = 5, width = 16 }}", table, target)
            self._keys(spec, sub, _PCIE_KEYS)
            for key in _PCIE_KEYS:
                self._int(spec, sub, key)
            out[target] = dict(spec)
        return out

    def table_versions(self, value: dict, table: str) -> dict:
        self._keys(value, table, _VERSION_KEYS)
        for key, version in value.items():
            if not isinstance(version, str):
                raise self.error(f"version {key} must be a string (quote it: \"{version}\")", table, key)
        return dict(value)

    def table_thresholds(self, value: dict, table: str) -> dict:
        specs = index()  # names and default thresholds, without importing the check modules
        out = {}
        for check_name, values in value.items():
            if check_name not in specs:
                raise self.error(f"thresholds for unknown check {check_name!r} (see `healthcheck checks`)",
                                 f"{table}.\"{check_name}\"" if isinstance(values, dict) else table,
                                 None if isinstance(values, dict) else check_name)
            if not isinstance(values, dict):
                raise self.error(f"thresholds.\"{check_name}\" must be a table", table, check_name)
            known = specs[check_name].thresholds
            for key, value in values.items():
                if key == "_context":  # checks.registry.CONTEXT_KEY: the judge's, not the site's
                    raise self.error(f"threshold name {key!r} is reserved for {check_name} (the judge passes "
                                     f"the context under it)", f"{table}.\"{check_name}\"", key)
                if key not in known:
                    allowed = ", ".join(sorted(known)) or "none"
                    raise self.error(f"unknown threshold {key!r} for {check_name} (allowed: {allowed})",
                                     f"{table}.\"{check_name}\"", key)
                problem = _threshold_type_problem(known[key], value)
                if problem:
                    raise self.error(f"threshold {check_name}.{key} {problem}, got {value!r}",
                                     f"{table}.\"{check_name}\"", key)
            out[check_name] = dict(values)
        return out

    def table_checks(self, value: dict, table: str) -> dict:
        names = list(index())
        out = {}
        for context, globs in value.items():
            if context not in CONTEXTS:
                raise self.error(f"unknown context {context!r} (allowed: {', '.join(CONTEXTS)})", table, context)
            if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
                raise self.error(f"checks.{context} must be a list of check names or globs", table, context)
            for glob in globs:
                if not any(matches(n, glob) for n in names):
                    raise self.error(f"checks.{context}: {glob!r} matches no check", table, context)
            out[context] = list(globs)
        return out

    def xid(self, value: Any) -> dict[str, dict[str, Any]]:
        if not isinstance(value, dict):
            raise self.error("[xid] must be a table of Xid numbers", "xid")
        out = {}
        for number, rule in value.items():
            if not str(number).isdigit():
                raise self.error(f"[xid] key {number!r} is not an Xid number", "xid", str(number))
            if not isinstance(rule, dict):
                raise self.error(f"xid {number} must be a table like {{ action = \"fail\" }}", "xid", str(number))
            self._keys(rule, f"xid.{number}", _XID_KEYS)
            if "action" in rule and rule["action"] not in ("fail", "warn", "ignore"):
                raise self.error(f"xid {number}: action must be fail, warn or ignore", "xid", str(number))
            for key, (low, high) in _XID_RANGES.items():
                if isinstance(rule.get(key), (int, float)) and not isinstance(rule[key], bool) \
                        and not low <= rule[key] <= high:  # NaN fails this too
                    raise self.error(f"xid {number}: {key} must be in [{low:,}, {high:,}], got {rule[key]!r}",
                                     "xid", str(number))
            out[str(number)] = dict(rule)
        for number, rule in out.items():  # the policy's own validation, with a line number
            try:
                load_xid_policy(overrides={number: rule})
            except ValueError as exc:
                raise self.error(str(exc), "xid", number) from exc
        return out


def validate_section(name: str, table: Any, where: str | None = None) -> Any:
    """One section's table (e.g. a file of ``[fabric.node]`` keys) through its validator, without the
    rest of a config: its settings, or ConfigError naming ``where`` (a file) and the key."""
    entry = SECTIONS.get(name)
    if entry is None:
        raise ConfigError(f"no config section {name!r} (known: {', '.join(SECTIONS)})", where)
    return Validator("", where).section(entry, table)


def slurm_section(table: Any) -> SlurmSettings:
    """[slurm]: how the hooks behave on this cluster (:mod:`healthcheck.config.slurm_settings`)."""
    if not isinstance(table, dict):
        raise ValueError("[slurm] must be a table")
    values, problem = validate_slurm(table)
    if problem:
        raise SectionError(*problem)
    return SlurmSettings(**values)


def history_section(table: Any) -> str | None:
    """[history] db_url = "postgresql://user@host/db" — the password never here (a file or the env)."""
    if not isinstance(table, dict):
        raise ValueError("[history] must be a table")
    for key in table:
        if key != "db_url":
            raise SectionError(key, f"unknown key {key!r} in [history] (allowed: db_url)")
    url = table.get("db_url")
    if url is None:
        return None
    if not isinstance(url, str) or not url:
        raise SectionError("db_url", "db_url must be a database URL string")
    if _URL_PASSWORD.match(url):
        raise SectionError("db_url", "db_url must not carry a password: put it in the file named by "
                           "HEALTHCHECK_DB_PASSWORD_FILE (or HEALTHCHECK_DB_PASSWORD)")
    return url


def _named_path(message: str, table: Any) -> list[str]:
    """The keys of ``table`` a validator's message names, outermost first (at each level the key the
    message names first, as a whole word): where to point the error."""
    import re  # error messages only

    path: list[str] = []
    while isinstance(table, dict) and table:
        found = []
        for key in table:
            hit = re.search(rf"(?<![A-Za-z0-9_]){re.escape(str(key))}(?![A-Za-z0-9_])", message)
            if hit:
                found.append((hit.start(), str(key)))
        if not found:
            break
        key = min(found)[1]
        path.append(key)
        table = table.get(key)
    return path


def _threshold_type_problem(default: Any, value: Any) -> str | None:
    """Why ``value`` cannot replace a threshold whose default is ``default`` (None: it can)."""
    if default is None:  # unset by default: any scalar sets it (the check documents which)
        if not isinstance(value, (bool, int, float, str)):
            return "must be a number, string or boolean"
        return _threshold_range_problem(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(default, (int, float)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return "must be a number"
        return _threshold_range_problem(value)
    if isinstance(default, str):
        return None if isinstance(value, str) else "must be a string"
    if isinstance(default, (list, tuple)):
        if not isinstance(value, list):
            return "must be a list"
        return None if all(isinstance(v, str) for v in value) else "must be a list of strings"
    return None


def _threshold_range_problem(value: int | float) -> str | None:
    low, high = THRESHOLD_RANGE
    return None if low <= value <= high else f"must be a finite number in [{low}, {high:.0e}]"


def _range_problem(key: str, value: int | float) -> str | None:
    """Why the number ``value`` of ``key`` is out of its range (NaN and infinities always are)."""
    low, high = _RANGES.get(key, (0, float("inf")))
    if (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
        return f"must be a finite number in [{low:,}, {high:,}], got {value!r}"
    return None


def _norm_table(name: str) -> str:
    return name.replace('"', "").replace("'", "").replace(" ", "")


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", bool: "true or false"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)
