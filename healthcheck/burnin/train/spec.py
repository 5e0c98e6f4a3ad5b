"""What one training run is (:class:`TrainSpec`: the model's sizes, the steps, the faults to inject)
and the data that judges it (:class:`TrainData`: tolerances, reference curves, throughput references),
read from ``healthcheck/data/train.toml`` and an optional site file merged over it. Pure: no torch, no
clock; the worker (``run.py``) reads a spec back from JSON."""
from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

DATA_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "data", "train.toml")
MODEL_KEYS = ("vocab", "d_model", "layers", "heads", "seq_len", "global_batch", "steps", "lr", "warmup_steps",
              "checkpoint_every")
_MODEL_LIMITS = {"vocab": (8, 1 << 20), "d_model": (8, 1 << 16), "layers": (1, 512), "heads": (1, 512),
                 "seq_len": (4, 1 << 17), "global_batch": (1, 1 << 20), "steps": (2, 1 << 20),
                 "lr": (1e-8, 10.0), "warmup_steps": (0, 1 << 20), "checkpoint_every": (1, 1 << 20)}
TOLERANCES = ("band_rel", "band_abs", "rank_agreement_rel", "resume_deviation_rel", "sm_activity_min_pct",
              "sm_activity_spread_pct", "warmup_steps")
KILL_MODES = ("rank", "step")


class TrainDataError(ValueError):
    """A model size, tolerance or reference that cannot be used, with where it came from."""


@dataclass(frozen=True)
class TrainSpec:
    """One run. ``kill_at``: the step after which the run dies on purpose (0: never), ``kill_mode`` "rank"
    (rank ``kill_rank``'s process is killed) or "step" (every rank's); ``resume``: start from the latest
    checkpoint in ``checkpoint_dir``; ``lr_scale`` and ``corrupt_rank``/``corrupt_step`` are faults the
    tests inject (a wrong learning rate; rank R's reduced gradient scaled after the all-reduce at step S,
    as a flipped bit in its reduction would)."""

    model: str = "tiny"
    vocab: int = 64
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    seq_len: int = 32
    global_batch: int = 8
    steps: int = 40
    lr: float = 0.003
    warmup_steps: int = 4
    checkpoint_every: int = 10
    seed: int = 1234
    backend: str = "gloo"  # gloo on CPUs, nccl on GPUs
    dtype: str = "fp32"    # fp32 on CPUs; bf16 autocast on GPUs
    checkpoint_dir: str = ""
    kill_at: int = 0
    kill_mode: str = "rank"
    kill_rank: int = 0
    resume: bool = False
    lr_scale: float = 1.0
    corrupt_rank: int = -1
    corrupt_step: int = 0
    collective_timeout_s: float = 120.0
    sample_activity: bool = True  # GPU SM activity sampled by each node's first rank (DCGM, else NVML)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainSpec":
        raw = json.loads(text)
        known = {f.name for f in fields(cls)}
        if not isinstance(raw, dict) or set(raw) - known:
            raise TrainDataError(f"train spec: unknown keys {sorted(set(raw) - known) if isinstance(raw, dict) else raw!r}")
        return check(cls(**raw))

    @property
    def key(self) -> str:
        return f"{self.model}|{self.backend}|{self.dtype}"


def check(spec: TrainSpec, world: int | None = None) -> TrainSpec:
    """``spec`` when every number is in range (and ``world`` divides the global batch); TrainDataError naming
    the first that is not."""
    for key in MODEL_KEYS:
        low, high = _MODEL_LIMITS[key]
        value = getattr(spec, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise TrainDataError(f"train {spec.model}: {key} = {value!r} out of range [{low:g}, {high:g}]")
    if spec.d_model % spec.heads:
        raise TrainDataError(f"train {spec.model}: d_model {spec.d_model} is not a multiple of heads {spec.heads}")
    if spec.backend not in ("gloo", "nccl") or spec.dtype not in ("fp32", "bf16"):
        raise TrainDataError(f"train: backend {spec.backend!r} / dtype {spec.dtype!r} (gloo|nccl, fp32|bf16)")
    if spec.kill_mode not in KILL_MODES or not 0 <= spec.kill_at < spec.steps:
        raise TrainDataError(f"train: kill_at {spec.kill_at} must be below steps {spec.steps}, kill_mode one of "
                             f"{', '.join(KILL_MODES)}")
    if not (math.isfinite(spec.lr_scale) and spec.lr_scale > 0 and spec.collective_timeout_s > 0):
        raise TrainDataError("train: lr_scale and collective_timeout_s must be positive")
    if world is not None and (world < 1 or spec.global_batch % world):
        raise TrainDataError(f"train {spec.model}: {world} ranks do not divide the global batch of "
                             f"{spec.global_batch} sequences (use a world size that divides it, or another model)")
    return spec


def world_class(world: int) -> str:
    """The reference curves' world-size class: 1, 2-8, 9-64, 65+."""
    if world <= 1:
        return "1"
    return "2-8" if world <= 8 else "9-64" if world <= 64 else "65+"


@dataclass(frozen=True)
class Figure:
    value: float
    source: str
    lower: float | None = None  # relative, as burnin_references.toml (-0.1: 10 % below value)
    unit: str = ""

    @property
    def floor(self) -> float | None:
        return None if self.lower is None else self.value * (1 + self.lower)


@dataclass(frozen=True)
class Curve:
    key: str
    loss: tuple[float, ...]
    recorded: str


@dataclass
class TrainData:
    models: dict[str, dict[str, Any]]
    tolerance: dict[str, Figure]
    curves: dict[str, Curve] = field(default_factory=dict)
    throughput: dict[str, Figure] = field(default_factory=dict)

    def spec(self, model: str, **overrides: Any) -> TrainSpec:
        if model not in self.models:
            raise TrainDataError(f"no train model {model!r} (known: {', '.join(sorted(self.models))})")
        return check(replace(TrainSpec(), **{"model": model, **self.models[model], **overrides}))

    def curve(self, spec: TrainSpec, world: int) -> Curve | None:
        return self.curves.get(f"{spec.key}|{world_class(world)}")

    def throughput_for(self, spec: TrainSpec, gpu_name: str | None) -> Figure | None:
        """The per-GPU (per rank) tokens/s reference: ``MODEL|BACKEND|DTYPE|SKU`` where the GPU's name
        contains SKU (the longest match), else ``MODEL|BACKEND|DTYPE`` (the CPU's)."""
        if gpu_name:
            best = [k for k in self.throughput if k.startswith(spec.key + "|")
                    and k.split("|")[-1].lower() in gpu_name.lower()]
            if best:
                return self.throughput[max(best, key=len)]
        return None if gpu_name else self.throughput.get(spec.key)

    def tol(self, name: str) -> float:
        return self.tolerance[name].value


def _figure(value: Any, where: str, need_lower: bool = False) -> Figure:
    if not isinstance(value, dict) or not isinstance(value.get("source"), str) or not value["source"].strip():
        raise TrainDataError(f"{where}: must be a table {{ value = ..., source = \"...\" }} (every figure says "
                             "where it comes from)")
    v, lower = value.get("value"), value.get("lower")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise TrainDataError(f"{where}: value must be a finite number >= 0, got {v!r}")
    if lower is not None and (isinstance(lower, bool) or not isinstance(lower, (int, float)) or not -1 <= lower <= 0):
        raise TrainDataError(f"{where}: lower must be a relative bound in [-1, 0], got {lower!r}")
    if need_lower and lower is None:
        raise TrainDataError(f"{where}: a throughput reference needs lower (the relative floor)")
    return Figure(float(v), value["source"], None if lower is None else float(lower), str(value.get("unit", "")))


def parse(data: dict[str, Any], where: str, base: TrainData | None = None) -> TrainData:
    """``data`` (a parsed TOML table) checked, merged over ``base`` key by key."""
    out = TrainData(dict(base.models) if base else {}, dict(base.tolerance) if base else {},
                    dict(base.curves) if base else {}, dict(base.throughput) if base else {})
    unknown = set(data) - {"model", "tolerance", "curve", "throughput"}
    if unknown:
        raise TrainDataError(f"{where}: unknown table(s) {', '.join(sorted(unknown))}")
    for name, table in (data.get("model") or {}).items():
        if not isinstance(table, dict) or set(table) - set(MODEL_KEYS):
            raise TrainDataError(f"{where}: [model.{name}]: keys are {', '.join(MODEL_KEYS)}")
        merged = {**out.models.get(name, {}), **table}
        missing = set(MODEL_KEYS) - set(merged)
        if missing:
            raise TrainDataError(f"{where}: [model.{name}] lacks {', '.join(sorted(missing))}")
        check(replace(TrainSpec(), model=name, **merged))
        out.models[name] = merged
    for name, value in (data.get("tolerance") or {}).items():
        if name not in TOLERANCES:
            raise TrainDataError(f"{where}: [tolerance] {name}: unknown (known: {', '.join(TOLERANCES)})")
        out.tolerance[name] = _figure(value, f"{where}: [tolerance] {name}")
    for key, table in (data.get("curve") or {}).items():
        loss = table.get("loss") if isinstance(table, dict) else None
        if len(key.split("|")) != 4 or not isinstance(loss, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in loss):
            raise TrainDataError(f"{where}: [curve.\"{key}\"]: key MODEL|BACKEND|DTYPE|WORLD-CLASS and loss = [finite "
                                 "numbers]")
        if not isinstance(table.get("recorded"), str) or not table["recorded"].strip():
            raise TrainDataError(f"{where}: [curve.\"{key}\"]: recorded = \"how and where it was recorded\" is required")
        if loss:  # an empty curve is a placeholder: that configuration has no reference yet
            out.curves[key] = Curve(key, tuple(float(x) for x in loss), table["recorded"])
    for key, table in (data.get("throughput") or {}).items():
        if not isinstance(table, dict) or set(table) != {"tokens_per_s"}:
            raise TrainDataError(f"{where}: [throughput.\"{key}\"]: one key, tokens_per_s")
        out.throughput[key] = _figure(table["tokens_per_s"], f"{where}: [throughput.\"{key}\"]", need_lower=True)
    missing = set(TOLERANCES) - set(out.tolerance)
    if missing:
        raise TrainDataError(f"{where}: [tolerance] lacks {', '.join(sorted(missing))}")
    return out


def load(site_path: str | None = None) -> TrainData:
    """The packaged data, and ``site_path``'s merged over it. TrainDataError (or OSError) names the file."""
    with open(DATA_FILE, "rb") as fh:
        data = parse(tomllib.load(fh), DATA_FILE)
    if site_path:
        try:
            with open(site_path, "rb") as fh:
                data = parse(tomllib.load(fh), site_path, data)
        except tomllib.TOMLDecodeError as exc:
            raise TrainDataError(f"{site_path}: {exc}") from None
    return data


def curve_entry(key: str, loss: list[float], recorded: str) -> str:
    """The TOML text of a reference curve (``--record-reference``)."""
    text = ", ".join(f"{x:.6g}" for x in loss)
    return f"[curve.\"{key}\"]\nrecorded = {json.dumps(recorded)}\nloss = [{text}]\n"
