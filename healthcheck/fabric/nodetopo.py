"""The topology inside one node -- which GPU pairs are joined by how many NVLinks, which HCA each GPU
sits nearest to, which NUMA node each GPU belongs to -- and its check against what the node should be.

Built from the parsed ``nvidia-smi topo -m`` (:mod:`healthcheck.parsers.nvidia_smi_topo`), optionally
with ``nvidia-smi topo -p2p r`` and ``nvidia-smi nvlink -s`` (:mod:`healthcheck.parsers.nvlink`).
Pure: parsed outputs in, :class:`NodeTopology` and findings out.

Expectations (a ``[fabric.node]`` section or a TOML file of the same keys; :func:`validate`), every
key optional::

    gpus = 8                        # GPU rows expected
    nvlink = "NV18"                 # the link kind of every GPU pair ("NV4", "SYS", ...)
    pairs = { "0-1" = "NV4" }       # per pair, overriding `nvlink`
    numa = [0, 0, 0, 0, 1, 1, 1, 1] # NUMA node per GPU index (list) or { "0" = 0, ... }
    hca = ["mlx5_0", "mlx5_3", ...] # the HCA each GPU must be nearest to (list or { "0" = "mlx5_0" })
    hca_relation = "PIX"            # the farthest allowed path from a GPU to its nearest HCA
    p2p = "OK"                      # every pair of `topo -p2p` must read this
    nvlinks_per_gpu = 18            # active links per GPU (`nvlink -s`)
    nvlink_speed_gbps = 26.5        # slowest allowed active link (`nvlink -s`, GB/s)

:func:`expectations_from` writes these keys from a known-good node's topology (the ``config generate``
idea: record a golden node, edit by hand).

NVSwitch or direct: ``topo -m`` prints ``NV#`` for a pair in both cases. A GPU whose NV# summed over
its peers exceeds MAX_LINKS_PER_GPU (no GPU has more) -- or, with ``nvlink -s``, whose pair count
equals its own number of links -- reaches its peers through NVSwitches; otherwise the links are direct.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from healthcheck.core.model import Finding, Status
from healthcheck.parsers.nvidia_smi_topo import PCIE_RANK, TopoMatrix, nvlink_count

CHECK = "fabric.node.topology"
MAX_LINKS_PER_GPU = 18  # NVLink 4 and 5: 18 links per GPU; earlier generations fewer
_KEYS = ("gpus", "nvlink", "pairs", "numa", "hca", "hca_relation", "p2p", "nvlinks_per_gpu",
         "nvlink_speed_gbps")


class TopologyExpectError(ValueError):
    """The node topology expectations are malformed (the message names the key)."""


@dataclass
class GpuPlace:
    index: int
    numa: str | None = None
    cpu_affinity: str | None = None
    nearest_hcas: list[str] = field(default_factory=list)
    hca_relation: str | None = None  # the link kind to the nearest HCA(s): PIX, PXB, PHB, NODE, SYS
    links_active: int | None = None  # from nvlink -s
    links_total: int | None = None
    inactive_links: list[int] = field(default_factory=list)
    slowest_link_gbps: float | None = None


@dataclass
class NodeTopology:
    gpus: dict[int, GpuPlace] = field(default_factory=dict)
    pairs: dict[tuple[int, int], str] = field(default_factory=dict)  # (i < j) -> "NV18" / "SYS" / ...
    p2p: dict[tuple[int, int], str] = field(default_factory=dict)  # (i < j) -> "OK" / "CNS" / ...
    hcas: list[str] = field(default_factory=list)

    def link(self, a: int, b: int) -> str | None:
        return self.pairs.get((min(a, b), max(a, b)))

    def switched(self, gpu: int) -> bool:
        """Whether the GPU reaches its peers through NVSwitches (see the module notes)."""
        counts = [nvlink_count(w) for (i, j), w in self.pairs.items() if gpu in (i, j)]
        if not any(counts):
            return False
        place = self.gpus.get(gpu)
        if place is not None and place.links_total:
            return max(counts) >= place.links_total and len([c for c in counts if c]) > 1
        return sum(counts) > MAX_LINKS_PER_GPU

    def path(self, a: int, b: int) -> str:
        """How GPU a reaches GPU b, in words, with what ``nvlink -s`` says about either end."""
        word = self.link(a, b)
        if word is None:
            return f"GPU{a}-GPU{b}: path unknown (no topology)"
        links = nvlink_count(word)
        if links:
            via = "through the NVSwitches" if self.switched(a) and self.switched(b) else "direct"
            text = f"GPU{a}-GPU{b}: {word} ({links} NVLinks, {via})"
        else:
            text = f"GPU{a}-GPU{b}: {word} (no NVLink: PCIe" + (", across NUMA nodes)" if word in ("SYS", "SOC")
                                                                else ")")
        notes = [f"GPU{g} has {len(p.inactive_links)} inactive link(s) ({_links(p.inactive_links)})"
                 for g, p in ((a, self.gpus.get(a)), (b, self.gpus.get(b))) if p and p.inactive_links]
        return text + ("; " + "; ".join(notes) if notes else "")


def _links(numbers: list[int]) -> str:
    return "link " + ", ".join(str(n) for n in numbers[:8]) + (", ..." if len(numbers) > 8 else "")


def build_topology(topo: TopoMatrix | None, p2p: TopoMatrix | None = None, nvlinks: dict | None = None
                   ) -> NodeTopology:
    """The node topology from ``topo -m`` (and optionally ``topo -p2p`` and ``nvlink -s``:
    ``{GpuKey: [NvLink]}`` as :func:`healthcheck.parsers.nvlink.parse_nvlink_status` returns)."""
    node = NodeTopology()
    if topo is not None:
        gpus = topo.gpus()
        nics = topo.nics()
        node.hcas = [n.hca or n.name for n in nics]
        for gpu in gpus:
            place = node.gpus[gpu.index] = GpuPlace(gpu.index, gpu.numa_affinity, gpu.cpu_affinity)
            ranked = [(PCIE_RANK.get(topo.link(gpu.name, n.name) or "", 99), n) for n in nics]
            ranked = [(rank, n) for rank, n in ranked if rank < 99]
            if ranked:
                best = min(rank for rank, _ in ranked)
                place.nearest_hcas = [n.hca or n.name for rank, n in ranked if rank == best]
                place.hca_relation = topo.link(gpu.name, next(n for r, n in ranked if r == best).name)
        for x in gpus:
            for y in gpus:
                if x.index < y.index:
                    word = topo.link(x.name, y.name)
                    if word:
                        node.pairs[(x.index, y.index)] = word
    if p2p is not None:
        for x in p2p.gpus():
            for y in p2p.gpus():
                if x.index < y.index and p2p.link(x.name, y.name):
                    node.p2p[(x.index, y.index)] = p2p.link(x.name, y.name)
                    node.gpus.setdefault(x.index, GpuPlace(x.index))
                    node.gpus.setdefault(y.index, GpuPlace(y.index))
    for key, links in (nvlinks or {}).items():
        place = node.gpus.setdefault(key.index, GpuPlace(key.index))
        place.links_total = len(links)
        place.links_active = sum(1 for link in links if link.active)
        place.inactive_links = [link.link for link in links if link.active is False]
        speeds = [link.speed_gbps for link in links if link.active and link.speed_gbps]
        place.slowest_link_gbps = min(speeds) if speeds else None
    return node


# ------------------------------------------------------------------------------------ expectations


@dataclass(frozen=True)
class TopoExpect:
    gpus: int | None = None
    nvlink: str | None = None
    pairs: dict = field(default_factory=dict)  # (i, j) -> word
    numa: dict = field(default_factory=dict)  # gpu -> "0"
    hca: dict = field(default_factory=dict)  # gpu -> "mlx5_0"
    hca_relation: str | None = None
    p2p: str | None = None
    nvlinks_per_gpu: int | None = None
    nvlink_speed_gbps: float | None = None


def _word(key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TopologyExpectError(f"{key}: expected a link word such as \"NV18\" or \"SYS\", not {value!r}")
    word = value.strip().upper()
    if not (nvlink_count(word) or word in PCIE_RANK):
        raise TopologyExpectError(f"{key}: {value!r} is not a link kind (NV#, PIX, PXB, PHB, NODE, SYS)")
    return word


def _per_gpu(key: str, value: object) -> dict[int, str]:
    if isinstance(value, list):
        items = list(enumerate(value))
    elif isinstance(value, dict):
        items = []
        for k, v in value.items():
            if not str(k).strip().isdigit():
                raise TopologyExpectError(f"{key}: key {k!r} is not a GPU index")
            items.append((int(str(k).strip()), v))
    else:
        raise TopologyExpectError(f"{key}: expected a list (one value per GPU index) or a table "
                                  f"{{\"0\" = ...}}, not {type(value).__name__}")
    out = {}
    for gpu, v in items:
        if isinstance(v, bool) or not isinstance(v, (str, int)) or not str(v).strip():
            raise TopologyExpectError(f"{key}[{gpu}]: expected a name or number, not {v!r}")
        out[gpu] = str(v).strip()
    return out


def _positive(key: str, value: object, kind: type) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
            or (kind is int and not isinstance(value, int)):
        raise TopologyExpectError(f"{key}: expected a positive {'integer' if kind is int else 'number'}, "
                                  f"not {value!r}")
    return value


def validate(section: dict) -> TopoExpect:
    """The node topology expectations from a config section or file (see the module notes)."""
    if not isinstance(section, dict):
        raise TopologyExpectError(f"expected a table of node topology expectations, not {type(section).__name__}")
    unknown = sorted(set(section) - set(_KEYS))
    if unknown:
        raise TopologyExpectError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    pairs = {}
    given = section.get("pairs") or {}
    if not isinstance(given, dict):
        raise TopologyExpectError(f"pairs: expected a table of GPU pairs such as {{ \"0-1\" = \"NV4\" }}, "
                                  f"not {type(given).__name__}")
    for name, word in given.items():
        a, sep, b = str(name).partition("-")
        if not (sep and a.strip().isdigit() and b.strip().isdigit()) or int(a) == int(b):
            raise TopologyExpectError(f"pairs: key {name!r} is not a GPU pair such as \"0-1\"")
        i, j = sorted((int(a), int(b)))
        pairs[(i, j)] = _word(f"pairs.{name}", word)
    relation = section.get("hca_relation")
    if relation is not None:
        relation = _word("hca_relation", relation)
        if relation not in PCIE_RANK:
            raise TopologyExpectError("hca_relation: a PCIe path kind (PIX, PXB, PHB, NODE, SYS)")
    p2p = section.get("p2p")
    if p2p is not None and (not isinstance(p2p, str) or p2p.strip().upper() not in ("OK", "CNS", "GNS", "TNS", "NS")):
        raise TopologyExpectError(f"p2p: expected \"OK\" (or another `topo -p2p` word), not {p2p!r}")
    return TopoExpect(
        gpus=_positive("gpus", section["gpus"], int) if "gpus" in section else None,
        nvlink=_word("nvlink", section["nvlink"]) if "nvlink" in section else None,
        pairs=pairs,
        numa=_per_gpu("numa", section["numa"]) if "numa" in section else {},
        hca=_per_gpu("hca", section["hca"]) if "hca" in section else {},
        hca_relation=relation,
        p2p=p2p.strip().upper() if p2p else None,
        nvlinks_per_gpu=_positive("nvlinks_per_gpu", section["nvlinks_per_gpu"], int)
        if "nvlinks_per_gpu" in section else None,
        nvlink_speed_gbps=float(_positive("nvlink_speed_gbps", section["nvlink_speed_gbps"], float))
        if "nvlink_speed_gbps" in section else None)


def expectations_from(node: NodeTopology) -> dict:
    """The expectations a known-good node meets, as a TOML-ready table (edit by hand after)."""
    out: dict = {"gpus": len(node.gpus)}
    words = set(node.pairs.values())
    if len(words) == 1:
        out["nvlink"] = words.pop()
    elif node.pairs:
        out["pairs"] = {f"{i}-{j}": w for (i, j), w in sorted(node.pairs.items())}
    indexes = sorted(node.gpus)
    if indexes and all(node.gpus[g].numa for g in indexes):
        out["numa"] = [int(n) if n.isdigit() else n for n in (node.gpus[g].numa for g in indexes)]
    if indexes and all(len(node.gpus[g].nearest_hcas) == 1 for g in indexes):
        out["hca"] = [node.gpus[g].nearest_hcas[0] for g in indexes]
        relations = [node.gpus[g].hca_relation for g in indexes]
        out["hca_relation"] = max(relations, key=lambda w: PCIE_RANK.get(w or "", 0))
    if node.p2p and set(node.p2p.values()) == {"OK"}:
        out["p2p"] = "OK"
    totals = {node.gpus[g].links_active for g in indexes}
    if len(totals) == 1 and None not in totals and totals != {0}:
        out["nvlinks_per_gpu"] = totals.pop()
    speeds = [p.slowest_link_gbps for p in node.gpus.values() if p.slowest_link_gbps]
    if speeds:
        out["nvlink_speed_gbps"] = min(speeds)
    return out


def check_topology(node: NodeTopology, exp: TopoExpect) -> list[Finding]:
    """One FAIL per deviation, named by GPU (or pair) with what was expected and found; one PASS
    listing what was checked when all match."""
    bad: list[Finding] = []
    checked: list[str] = []

    def fail(component: str, message: str) -> None:
        bad.append(Finding(CHECK, Status.FAIL, message, component))

    indexes = sorted(node.gpus)
    if exp.gpus is not None:
        checked.append(f"{exp.gpus} GPUs")
        if len(indexes) != exp.gpus:
            fail("node", f"{len(indexes)} GPUs in the topology, expected {exp.gpus}")
    if exp.nvlink or exp.pairs:
        checked.append("GPU pair links")
        wanted = {}
        if exp.nvlink:
            wanted = {(i, j): exp.nvlink for i in indexes for j in indexes if i < j}
        wanted.update(exp.pairs)
        for (i, j), word in sorted(wanted.items()):
            found = node.link(i, j)
            if found != word:
                fail(f"GPU{i}-GPU{j}", f"GPU{i}-GPU{j}: {found or 'no link printed'}, expected {word}"
                     + (f" ({nvlink_count(word) - nvlink_count(found)} NVLink(s) missing)"
                        if nvlink_count(word) > nvlink_count(found) and nvlink_count(found) else ""))
    for gpu, numa in sorted(exp.numa.items()):
        place = node.gpus.get(gpu)
        if place is None:
            fail(f"GPU{gpu}", f"GPU{gpu}: not in the topology (expected on NUMA node {numa})")
        elif place.numa != numa:
            fail(f"GPU{gpu}", f"GPU{gpu}: on NUMA node {place.numa or 'N/A'}, expected {numa}"
                 + (f" (CPU affinity {place.cpu_affinity})" if place.cpu_affinity else ""))
    if exp.numa:
        checked.append("NUMA nodes")
    for gpu, hca in sorted(exp.hca.items()):
        place = node.gpus.get(gpu)
        if place is None:
            fail(f"GPU{gpu}", f"GPU{gpu}: not in the topology (expected nearest to {hca})")
        elif hca not in place.nearest_hcas:
            found = ", ".join(place.nearest_hcas) or "no HCA"
            fail(f"GPU{gpu}", f"GPU{gpu}: nearest HCA {found} ({place.hca_relation or '-'}), expected {hca}")
    if exp.hca:
        checked.append("nearest HCAs")
    if exp.hca_relation:
        checked.append(f"HCA path at most {exp.hca_relation}")
        limit = PCIE_RANK[exp.hca_relation]
        for gpu in indexes:
            place = node.gpus[gpu]
            if place.hca_relation and PCIE_RANK.get(place.hca_relation, 99) > limit:
                fail(f"GPU{gpu}", f"GPU{gpu}: nearest HCA {', '.join(place.nearest_hcas)} is {place.hca_relation}"
                     f" away, expected at most {exp.hca_relation}")
    if exp.p2p:
        checked.append(f"P2P {exp.p2p}")
        if not node.p2p:
            bad.append(Finding(CHECK, Status.ERROR, "P2P status expected but no `nvidia-smi topo -p2p` "
                               "output given", "node"))
        for (i, j), word in sorted(node.p2p.items()):
            if word != exp.p2p:
                fail(f"GPU{i}-GPU{j}", f"GPU{i}-GPU{j}: P2P {word}, expected {exp.p2p}")
    if exp.nvlinks_per_gpu or exp.nvlink_speed_gbps:
        checked.append("NVLink states")
        known = [g for g in indexes if node.gpus[g].links_total is not None]
        if not known:
            bad.append(Finding(CHECK, Status.ERROR, "NVLink states expected but no `nvidia-smi nvlink -s` "
                               "output given", "node"))
        for gpu in known:
            place = node.gpus[gpu]
            if exp.nvlinks_per_gpu and (place.links_active or 0) != exp.nvlinks_per_gpu:
                fail(f"GPU{gpu}", f"GPU{gpu}: {place.links_active} active NVLinks, expected "
                     f"{exp.nvlinks_per_gpu}" + (f" (inactive: {_links(place.inactive_links)})"
                                                 if place.inactive_links else ""))
            if exp.nvlink_speed_gbps and place.slowest_link_gbps is not None \
                    and place.slowest_link_gbps < exp.nvlink_speed_gbps:
                fail(f"GPU{gpu}", f"GPU{gpu}: slowest active NVLink {place.slowest_link_gbps:g} GB/s, "
                     f"expected at least {exp.nvlink_speed_gbps:g}")
    if bad:
        return bad
    if not checked:
        return [Finding(CHECK, Status.SKIP, "no node topology expectations given", "node")]
    return [Finding(CHECK, Status.PASS, f"{len(indexes)} GPUs match: " + ", ".join(checked), "node")]


def to_dict(node: NodeTopology) -> dict:
    return {"gpus": {str(g): {"numa": p.numa, "cpu_affinity": p.cpu_affinity, "nearest_hcas": p.nearest_hcas,
                              "hca_relation": p.hca_relation, "links_active": p.links_active,
                              "links_total": p.links_total, "inactive_links": p.inactive_links,
                              "slowest_link_gbps": p.slowest_link_gbps} for g, p in sorted(node.gpus.items())},
            "pairs": {f"{i}-{j}": w for (i, j), w in sorted(node.pairs.items())},
            "p2p": {f"{i}-{j}": w for (i, j), w in sorted(node.p2p.items())},
            "hcas": node.hcas}
