"""The `[burnin]` table of the config, the suites, and the environment overrides the sbatch templates
use. Precedence: built-in suite preset < `[burnin]` in the config < environment (HEALTHCHECK_BURNIN_*)
< command-line flags."""
from __future__ import annotations

from ..core.struct import record as dataclass, fields, replace
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Mapping  # noqa: F401

SUITES = ("quick", "standard", "full")
PHASES = ("checks", "gemm", "bandwidth", "dcgm", "nccl", "nic", "storage")  # each node's own (node_run.PHASES)
OPT_IN_PHASES = ("soak",)  # node phases run only when `phases` names them (hours long: soak_duration_s)
ALLOCATION_PHASES = ("rdma",)  # the job step's alone: perftest pairs across the allocation (full suite, or asked)
_FULL_PHASES = PHASES + OPT_IN_PHASES + ALLOCATION_PHASES  # the full suite's (train is never in a suite)
# the job step's, run only when `phases` names it: the training smoke test across the allocation (burnin/train/)
OPT_IN_ALLOCATION_PHASES = ("train",)
ALL_PHASES = _FULL_PHASES + OPT_IN_ALLOCATION_PHASES
BACKENDS = ("auto", "torch", "cupy", "numpy")
DTYPES = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class BurninSettings:
    suite: str = "standard"
    phases: tuple[str, ...] = PHASES
    backend: str = "auto"
    gemm_duration_s: float = 300.0
    gemm_n: int = 8192
    gemm_dtype: str = "bf16"
    bandwidth_bytes: int = 1 << 30
    bandwidth_repeats: int = 10
    dcgm_level: int = 2
    dcgmi: str = "dcgmi"
    dcgm_timeout_s: float = 1800.0
    nccl_dir: str = "/usr/local/nccl-tests/build"
    nccl_collectives: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")
    nccl_max_bytes: int = 8 << 30
    nccl_iters: int = 20
    nccl_timeout_s: float = 900.0
    # multi-rank steps: an argument list with {nnodes} {nodelist} {tasks_per_node}; see nccl_run.py
    launcher: tuple[str, ...] = ("srun", "--overlap", "--mpi=pmix", "--kill-on-bad-exit=1", "-N", "{nnodes}",
                                 "-w", "{nodelist}", "--ntasks-per-node", "{tasks_per_node}")
    fabric: str = ""          # a [fabric.NAME] of the references for the cross-node collective
    references: str = ""      # site references file, merged over the built-in ones
    storage_paths: tuple[str, ...] = ()
    fio: str = "fio"
    storage_bytes: int = 4 << 30
    storage_runtime_s: float = 60.0
    results_dir: str = ""     # where each node leaves its result for the allocation step (shared FS)
    drain: bool = True        # drain what the burn-in attributes (ownership rules apply)
    max_drain_fraction: float = 0.25  # blast radius: never drain more than this share of the allocation...
    max_drain_nodes: int = 0          # ...or this many nodes (0 = no absolute cap)
    localise: bool = True
    seed: int = 1234
    fleet_digests: str = ""   # the fleet's majority GEMM digests (``healthcheck burnin fleet-digests``)
    known_good: str = ""      # hostlist of nodes trusted as localisation partners (those inside the job)
    soak_duration_s: float = 3600.0  # the soak phase (opt-in: phases = [..., "soak"]): GEMM for this long...
    soak_sample_s: float = 60.0      # ...in slices of this length, one telemetry/throughput point each
    # the NIC phase (burnin/nic.py): a loopback ib_write_bw per HCA port and a NIC-only all_reduce
    nic_duration_s: float = 5.0      # -D of each loopback
    nic_gpu_memory: str = "auto"     # "auto": from the nearest GPU's memory where perftest has CUDA; "host"
    nic_timeout_s: float = 120.0     # deadline of one loopback (server and client)
    nic_loopback_fraction: float = 0.0  # floor as a fraction of the line rate; 0: data/nic_loopback.toml's
    nic_nccl_fraction: float = 0.0      # the same for the NIC-only all_reduce
    # the training smoke test (opt-in: phases = [..., "train"], or `healthcheck burnin train`; docs/train.md)
    train_model: str = "auto"        # a [model.NAME] of data/train.toml; "auto": small on GPUs, tiny on CPUs
    train_resume: bool = True        # kill the run mid-way and resume it from its checkpoint
    train_kill_mode: str = "rank"    # "rank": one rank's process dies; "step": every rank's
    train_tasks_per_node: int = 0    # ranks per node; 0: the node's GPU count (1 on a CPU node)
    train_timeout_s: float = 900.0   # deadline of one launch of the training
    train_references: str = ""       # site file merged over data/train.toml (models, curves, throughput)

    def phase_on(self, name: str) -> bool:
        return name in self.phases


PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"gemm_duration_s": 30.0, "bandwidth_repeats": 5, "dcgm_level": 1, "nccl_collectives": ("all_reduce",),
              "nccl_max_bytes": 1 << 30, "nccl_iters": 10, "storage_runtime_s": 15.0},
    "standard": {},
    "full": {"phases": _FULL_PHASES, "gemm_duration_s": 1800.0, "bandwidth_repeats": 20, "dcgm_level": 3,
             "nccl_collectives": ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce",
                                  "sendrecv"),
             "nccl_max_bytes": 16 << 30, "nccl_iters": 50, "storage_runtime_s": 300.0},
}

ENV_PREFIX = "HEALTHCHECK_BURNIN_"
_CHOICES = {"suite": SUITES, "backend": BACKENDS, "gemm_dtype": DTYPES, "nic_gpu_memory": ("auto", "host"),
            "train_kill_mode": ("rank", "step")}
_LIST_CHOICES = {"phases": ALL_PHASES, "nccl_collectives": ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                                            "broadcast", "reduce", "sendrecv")}
_LIMITS = {"gemm_n": (16, 65536), "bandwidth_bytes": (1 << 20, 1 << 36), "bandwidth_repeats": (1, 1000),
           "dcgm_level": (1, 4), "nccl_max_bytes": (8, 1 << 36), "nccl_iters": (1, 10000),
           "storage_bytes": (1 << 20, 1 << 42), "max_drain_nodes": (0, 1 << 20), "seed": (0, 1 << 31),
           "soak_duration_s": (1, 7 * 86400), "soak_sample_s": (0.1, 3600), "nic_duration_s": (1, 3600),
           "nic_timeout_s": (1, 86400), "train_tasks_per_node": (0, 1024), "train_timeout_s": (10, 86400)}


class SettingsError(ValueError):
    pass


def _coerce(key: str, value: Any, default: Any, where: str) -> Any:
    """``value`` checked against ``default``'s type; strings from the environment are converted."""
    from_env = isinstance(value, str) and not isinstance(default, str)
    if isinstance(default, bool):
        if from_env:
            if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise SettingsError(f"{where}: {key} must be true or false, got {value!r}")
            value = value.lower() in ("1", "true", "yes")
        if not isinstance(value, bool):
            raise SettingsError(f"{where}: {key} must be true or false")
        return value
    if isinstance(default, tuple):
        if from_env or isinstance(value, str):
            value = [v for v in (value.split() if key == "launcher" else value.replace(",", " ").split())]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise SettingsError(f"{where}: {key} must be a list of strings")
        allowed = _LIST_CHOICES.get(key)
        bad = [v for v in value if allowed and v not in allowed]
        if bad:
            raise SettingsError(f"{where}: {key}: unknown {', '.join(bad)} (allowed: {', '.join(allowed)})")
        return tuple(value)
    if isinstance(default, (int, float)):
        if from_env:
            try:
                value = float(value) if isinstance(default, float) else int(value)
            except ValueError:
                raise SettingsError(f"{where}: {key} must be a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (isinstance(default, int) and not isinstance(value, int)):
            raise SettingsError(f"{where}: {key} must be a{'n integer' if isinstance(default, int) else ' number'}")
        low, high = _LIMITS.get(key, (0, 1e9))
        if isinstance(default, float) and key.endswith("fraction"):
            low, high = 0.0, 1.0
        if not low <= value <= high or (isinstance(default, float) and key.endswith("_s") and value <= 0):
            raise SettingsError(f"{where}: {key} = {value} out of range [{low:g}, {high:g}]")
        return float(value) if isinstance(default, float) else int(value)
    if not isinstance(value, str):
        raise SettingsError(f"{where}: {key} must be a string")
    if key in _CHOICES and value not in _CHOICES[key]:
        raise SettingsError(f"{where}: {key} must be one of {', '.join(_CHOICES[key])}, got {value!r}")
    if key == "known_good" and value:
        from ClusterShell.NodeSet import NodeSet, NodeSetParseError

        try:
            NodeSet(value)
        except NodeSetParseError as exc:
            raise SettingsError(f"{where}: known_good {value!r} is not a Slurm hostlist ({exc})") from None
    return value


def validate(table: Mapping[str, Any], where: str = "[burnin]") -> dict[str, Any]:
    """A `[burnin]` table (or flags, or the environment's values) as clean values; SettingsError names
    the key."""
    known = {f.name: f.default for f in fields(BurninSettings)}
    out = {}
    for key, value in table.items():
        if key not in known:
            raise SettingsError(f"{where}: unknown key {key!r} (allowed: {', '.join(known)})")
        out[key] = _coerce(key, value, known[key], where)
    return out


def from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """HEALTHCHECK_BURNIN_GEMM_DURATION_S=60 -> {"gemm_duration_s": 60.0} (validated)."""
    table = {k[len(ENV_PREFIX):].lower(): v for k, v in environ.items() if k.startswith(ENV_PREFIX) and v != ""}
    return validate(table, "environment")


def resolve(config_table: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
            flags: Mapping[str, Any] | None = None) -> BurninSettings:
    """The effective settings: the suite preset (the suite itself chosen by the highest layer that sets
    it), then the config table, the environment, the flags."""
    layers = [validate(config_table or {}), from_env(environ or {}), validate(
        {k: v for k, v in (flags or {}).items() if v is not None}, "command line")]
    suite = next((layer["suite"] for layer in reversed(layers) if "suite" in layer), BurninSettings.suite)
    merged: dict[str, Any] = {"suite": suite, **PRESETS[suite]}
    for layer in layers:
        merged.update(layer)
    settings = replace(BurninSettings(), **merged)
    if settings.soak_sample_s > settings.soak_duration_s:
        raise SettingsError(f"burnin settings: soak_sample_s = {settings.soak_sample_s:g} is longer than "
                            f"soak_duration_s = {settings.soak_duration_s:g} (a slice cannot outlast the soak)")
    return settings


def describe(settings: BurninSettings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in fields(settings)}


__all__ = ["BurninSettings", "SettingsError", "resolve", "validate", "from_env", "describe", "PHASES", "ALL_PHASES",
           "SUITES"]
