"""The drill's workspace on the cluster's host: the site config the hooks read, the installed hooks,
each node's hardware as a recorded bundle (``bundle = "DIR/bundles/{node}"``), the spool and state
folders, and the faults a drill switches on and off:

- a fault bundle copied over a node's bundle (and the healthy one copied back to repair it);
- a hung GPU: the node moved to a class whose sysfs has an NVIDIA device whose ``vendor`` file is a
  FIFO without a writer (reading it blocks forever, as a wedged driver does), and back.

``Site.prepare`` writes it all and ``site.json`` (what ``Site.open`` reads back); the cluster is then
started (or reconfigured) with the hooks it prints as slurm.conf lines."""
from __future__ import annotations

import json
import os
import shutil
import stat

from ..spool import store as spool
from ..safeio import subproc
from ..safeio.atomic import atomic_write
from ..deploy.install import install_hooks
from ..config.topology import MAX_GROUP_NODES, nodeset_size_bound
from .cluster import DrillError, check_node

SITE_FILE = "site.json"
HOOK_TIMEOUT_S = 120.0
DEFAULT_BUDGETS = {"prolog_budget_s": 3.0, "slurm_check_budget_s": 5.0, "epilog_budget_s": 10.0}
MAX_NODES = MAX_GROUP_NODES  # a site's nodes, as a [topology] group's


def parse_nodes(text: str) -> list[str]:
    """The nodes of a node set (``node[1-4]``, ``a,b``); DrillError for a set that does not parse or
    that names more than MAX_NODES nodes -- refused from its bracket ranges before a single name is
    built (``node[1-99999999]`` would take gigabytes)."""
    bound = nodeset_size_bound(text, MAX_NODES)
    if bound > MAX_NODES:
        raise DrillError(f"{text[:80]!r} names {bound:,} nodes, over the limit of {MAX_NODES:,} for a drill site")
    try:
        from ClusterShell.NodeSet import NodeSet, NodeSetParseError
        from ClusterShell.RangeSet import RangeSetParseError
    except ImportError:  # a plain comma list without ClusterShell
        return [n.strip() for n in text.split(",") if n.strip()]
    try:
        return list(NodeSet(text))
    except (NodeSetParseError, RangeSetParseError) as exc:
        raise DrillError(str(exc)) from None


def _is_bundle(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


class Site:
    __slots__ = ("root", "slurm_conf", "nodes", "healthy", "fault", "budgets", "python", "hung")

    def __init__(self, root: str, slurm_conf: str, nodes: list[str], healthy: str, fault: str,
                 budgets: dict[str, float] | None = None, python: str | None = None,
                 hung: list[str] | None = None):
        self.root = os.path.abspath(root)
        self.slurm_conf = os.path.abspath(slurm_conf)
        if len(nodes) > MAX_NODES:
            raise DrillError(f"{len(nodes):,} nodes, over the limit of {MAX_NODES:,} for a drill site")
        self.nodes = [check_node(n) for n in nodes]
        if not self.nodes:
            raise DrillError("a drill site needs at least one node")
        self.healthy, self.fault = os.path.abspath(healthy), os.path.abspath(fault)
        self.budgets = dict(DEFAULT_BUDGETS, **(budgets or {}))
        for key, value in self.budgets.items():
            if key not in DEFAULT_BUDGETS:
                raise DrillError(f"unknown budget {key!r} (known: {', '.join(DEFAULT_BUDGETS)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
                raise DrillError(f"{key} must be a number of seconds in (0, 3600], got {value!r}")
        self.python = os.path.abspath(python) if python else None
        self.hung = list(hung or [])

    # -- paths ------------------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def config(self) -> str:
        return self.path("site.toml")

    @property
    def hooks(self) -> str:
        return self.path("hooks")

    @property
    def spool_dir(self) -> str:
        return self.path("spool")

    @property
    def state_dir(self) -> str:
        return self.path("state")

    def pending_file(self, node: str) -> str:
        return os.path.join(self.state_dir, check_node(node), "pending-actions.jsonl")

    # -- set up -----------------------------------------------------------------------------------
    @classmethod
    def prepare(cls, root: str, slurm_conf: str, nodes: list[str], healthy: str, fault: str,
                budgets: dict[str, float] | None = None, python: str | None = None) -> "Site":
        """Write the workspace: bundles (every node healthy), config, hooks, site.json."""
        for what, path in (("healthy bundle", healthy), ("fault bundle", fault)):
            if not _is_bundle(path):
                raise DrillError(f"the {what} {path} is not a bundle directory")
        if not os.path.isfile(slurm_conf):
            raise DrillError(f"slurm.conf {slurm_conf} does not exist")
        site = cls(root, slurm_conf, nodes, healthy, fault, budgets, python)
        os.makedirs(site.path("bundles"), exist_ok=True)
        for node in site.nodes:
            site.set_bundle(node, fault=False)
        site._make_hung_sysfs()
        site.write_config()
        install_hooks(site.hooks, site.config, python=site.python, slurm_conf=site.slurm_conf)
        site.save()
        return site

    @classmethod
    def open(cls, root: str) -> "Site":
        try:
            with open(os.path.join(root, SITE_FILE), encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise DrillError(f"{root} is not a drill site (no {SITE_FILE}; run `drill prepare` first)") from None
        except (OSError, ValueError) as exc:
            raise DrillError(f"cannot read {os.path.join(root, SITE_FILE)}: {exc}") from None
        if not isinstance(data, dict):
            raise DrillError(f"{os.path.join(root, SITE_FILE)} is not a JSON object")
        try:
            return cls(root, data["slurm_conf"], list(data["nodes"]), data["healthy"], data["fault"],
                       data.get("budgets"), data.get("python"), data.get("hung"))
        except (KeyError, TypeError) as exc:
            raise DrillError(f"{os.path.join(root, SITE_FILE)}: missing or bad field {exc}") from None

    def save(self) -> None:
        data = {"slurm_conf": self.slurm_conf, "nodes": self.nodes, "healthy": self.healthy,
                "fault": self.fault, "budgets": self.budgets, "python": self.python, "hung": self.hung}
        atomic_write(self.path(SITE_FILE), json.dumps(data, indent=1) + "\n", mode=0o644)

    def slurm_conf_lines(self) -> str:
        return (f"Prolog={self.hooks}/prolog.sh\nEpilog={self.hooks}/epilog.sh\n"
                f"HealthCheckProgram={self.hooks}/healthcheck.sh\nPrologFlags=Alloc\n")

    def write_config(self) -> None:
        """site.toml: the bundled class (every node not hung) and, if any, the hung class."""
        bundled = [n for n in self.nodes if n not in self.hung]
        lines = []
        if bundled:
            lines += ["[class.bundled]", f"nodes = {json.dumps(','.join(bundled))}",
                      f"bundle = {json.dumps(self.path('bundles') + '/{node}')}"]
        if self.hung:
            lines += ["[class.hung]", f"nodes = {json.dumps(','.join(self.hung))}",
                      f"sysfs_root = {json.dumps(self.path('hung-sys'))}"]
        settings = {"state_dir": self.state_dir, "spool_dir": self.spool_dir, **self.budgets}
        lines += ["[slurm]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
        atomic_write(self.config, "\n".join(lines) + "\n", mode=0o644)

    def _make_hung_sysfs(self) -> None:
        dev = self.path("hung-sys", "bus", "pci", "devices", "0000:18:00.0")
        os.makedirs(dev, exist_ok=True)
        vendor = os.path.join(dev, "vendor")
        try:
            mode = os.lstat(vendor).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISFIFO(mode):
            os.unlink(vendor)
            mode = None
        if mode is None:
            os.mkfifo(vendor, 0o600)
        atomic_write(os.path.join(dev, "class"), "0x030200\n", mode=0o644)

    # -- faults -----------------------------------------------------------------------------------
    def set_bundle(self, node: str, fault: bool) -> None:
        """Node ``node``'s hardware becomes the fault bundle (or the healthy one): copied aside, then
        swapped in by rename, so a hook never reads half a bundle."""
        target = self.path("bundles", check_node(node))
        partial = target + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(self.fault if fault else self.healthy, partial)
        old = target + ".old"
        shutil.rmtree(old, ignore_errors=True)
        if os.path.exists(target):
            os.rename(target, old)
        os.rename(partial, target)
        shutil.rmtree(old, ignore_errors=True)

    def set_hung(self, node: str, hung: bool) -> None:
        """Move ``node`` into the hung-GPU class (or back to its bundle)."""
        check_node(node)
        if node not in self.nodes:
            raise DrillError(f"{node} is not a node of this site ({', '.join(self.nodes)})")
        self.hung = sorted(set(self.hung) | {node}) if hung else [n for n in self.hung if n != node]
        self.write_config()
        self.save()

    # -- hooks and records ------------------------------------------------------------------------
    def health_check(self, node: str) -> subproc.Result:
        """Run the installed HealthCheckProgram as slurmd runs it (SLURMD_NODENAME, a minimal env)."""
        return subproc.run([os.path.join(self.hooks, "healthcheck.sh")], timeout=HOOK_TIMEOUT_S,
                           env={"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": check_node(node)})

    def records(self) -> list[dict]:
        records, _corrupt = spool.read_all(self.spool_dir)
        return records

    def runs(self, node: str, context: str | None = None, job_id: str | None = None) -> list[dict]:
        return [r for r in self.records() if r.get("kind") == "run" and r.get("node") == node
                and (context is None or r.get("context") == context)
                and (job_id is None or r.get("job_id") == job_id)]

    def actions(self, node: str, action: str | None = None) -> list[dict]:
        return [r for r in self.records() if r.get("kind") == "action" and r.get("node") == node
                and (action is None or r.get("action") == action)]
