"""The burn-in of one node: the phases in order, each bounded, each turning its measurements into
findings; one verdict (context ``burnin``) per node, recorded to the spool (history) and to the job's
results directory (for the allocation step).

After the load phases, the node checks run again over a fresh snapshot (``burnin.recheck``: what got
worse; ``burnin.load_errors``: new Xids, pending remaps, counter growth under load; see
:mod:`.judge_recheck`) whenever the checks phase ran and a load phase followed it.

A failing phase does not stop the others; only an unusable node does (a GPU lost or wedged: the
GPU phases would hang or measure nothing), and then they are SKIPped with that reason. A phase that
crashes is an ERROR finding of that phase, never a lost run.
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.model import Finding, Status, Verdict
from ..policies.references import References, Sku
from .settings import BurninSettings

UNUSABLE = ("gpu.lost", "gpu.responsive", "gpu.reset_required")


@dataclass
class NodeContext:
    node: str
    settings: BurninSettings
    refs: References
    job_id: str | None = None
    job_nodes: str | None = None
    snapshot: Callable[[], tuple[Any, Any]] | None = None  # () -> (Snapshot, Expectations) for the checks phase
    fleet_digests: dict[str, str] | None = None
    log: Callable[[str], None] = lambda _msg: None
    node_class: str | None = None
    # progress lines (a start and an end line per phase, elapsed time, ETA); None: none. The CLI passes an
    # echo to stderr on a terminal or when asked (--progress)
    progress: Callable[[str], None] | None = None
    sysfs_root: str = "/sys"  # where the NIC phase reads the PCI tree and the HCAs (a fixture tree in tests)
    # filled while running
    sku: Sku | None = None
    gpu_name: str | None = None
    gpu_count: int = 0
    backend_name: str | None = None
    unusable: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # the checks phase's snapshot and findings: what the re-check after the load compares with
    before: Any = None
    expectations: Any = None  # the checks phase's Expectations (the NIC phase's line rates)
    before_findings: list[Finding] = field(default_factory=list)


ENV_PREFIXES = ("NCCL_", "UCX_")
# Where the job's container image shows from inside it: Apptainer/Singularity name the image; a site
# using pyxis/enroot (whose containers do not name their image inside) sets HEALTHCHECK_CONTAINER_IMAGE
# in the burn-in job (e.g. the image digest it passed to --container-image).
IMAGE_VARIABLES = ("HEALTHCHECK_CONTAINER_IMAGE", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")


def job_environment(environ) -> dict:
    """What the job's environment says for the software consistency check (fabric/software.py): the
    ``NCCL_*``/``UCX_*`` variables a job gets (``env``) and the container image (``container_image``),
    each only when present; values bounded (a variable is not a place for data)."""
    out: dict = {}
    env = {k: str(v)[:512] for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}
    if env:
        out["env"] = dict(list(env.items())[:200])
    image = next((environ[k] for k in IMAGE_VARIABLES if environ.get(k)), None)
    if image:
        out["container_image"] = str(image)[:512]
    return out


def _phase_checks(ctx: NodeContext) -> list[Finding]:
    from ..pipeline.judge import judge

    if ctx.snapshot is None:
        return [Finding("burnin.checks", Status.SKIP, "node checks not configured for this run")]
    snap, exp = ctx.snapshot()
    verdict = judge(snap, exp, "burnin")
    ctx.before, ctx.before_findings = snap, list(verdict.findings)
    ctx.expectations = exp
    if snap.versions:  # for the fleet's version-drift analysis (the sweep, the report)
        ctx.extra["versions"] = dict(snap.versions)
    ctx.extra.update(job_environment(os.environ))  # the allocation compares them across its nodes
    if snap.ib_ports:  # for the allocation's RDMA pair phase: which HCAs each node has up
        ctx.extra["hcas"] = [{"device": p.device, "port": p.port, "state": p.state, "link_layer": p.link_layer,
                              "rate_gbps": p.rate_gbps} for p in snap.ib_ports]
    if snap.gpus:
        ctx.gpu_name = next((g.name for g in snap.gpus if g.name), None)
        ctx.gpu_count = len(snap.gpus)
        ctx.sku = ctx.refs.sku_for(ctx.gpu_name)
    bad = [f for f in verdict.findings if f.check in UNUSABLE and f.status is Status.FAIL]
    if bad:
        ctx.unusable = f"{bad[0].check}: {bad[0].message}"
    return verdict.findings


class NoGpuBackend(RuntimeError):
    """NVIDIA GPUs on the node, but the "auto" backend found nothing that runs on them."""


def _backend(ctx: NodeContext):
    """The compute backend, its devices, and the references of what they are (a NumPy run on the CPU
    is judged against a CPU entry of the references if the site has one, never against the GPU's).
    NoGpuBackend when "auto" fell back to NumPy on a node with NVIDIA GPUs: a burn-in that stressed the
    CPU instead of the GPUs must not pass (``backend = "numpy"`` asks for the CPU on purpose)."""
    from ..probes.nvml import nvidia_gpu_present
    from .backends import select_backend

    backend = select_backend(ctx.settings.backend)
    ctx.backend_name = backend.name
    if backend.name == "numpy" and ctx.settings.backend == "auto":
        gpus = ctx.gpu_count or len(nvidia_gpu_present())
        if gpus:
            why = "; ".join(w[:100] for w in backend.fallback) or "none importable"
            raise NoGpuBackend(f"{gpus} NVIDIA GPU(s) here but no GPU compute backend ({why}): the GPUs were not "
                               "stressed (install torch or CuPy with CUDA; backend = \"numpy\" tests the CPU)")
    devices = backend.devices()
    if backend.name != "numpy":
        ctx.gpu_count = max(ctx.gpu_count, len(devices))
        if devices and ctx.gpu_name is None:
            ctx.gpu_name = devices[0].name
            ctx.sku = ctx.refs.sku_for(ctx.gpu_name)
    return backend, devices, ctx.refs.sku_for(devices[0].name if devices else None)


def _nvml(indices: list[int]):
    """pynvml, initialised, when this node has NVIDIA GPUs; None otherwise (telemetry is then skipped)."""
    from ..probes.nvml import nvidia_gpu_present

    if not indices or not nvidia_gpu_present():
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no driver: telemetry is skipped, the phase still runs
        return None


def _phase_gemm(ctx: NodeContext) -> list[Finding]:
    from .gemm import run_gemm
    from .judge_compute import fleet_key, judge_gemm, judge_telemetry
    from .telemetry import Sampler

    backend, devices, sku = _backend(ctx)
    s = ctx.settings
    indices = [d.index for d in devices]
    nvml = _nvml(indices) if backend.name != "numpy" else None
    n = s.gemm_n if backend.name != "numpy" else min(s.gemm_n, 512)
    dtype = s.gemm_dtype if backend.name != "numpy" else "fp32"
    if nvml is None:
        results = run_gemm(backend, indices, duration_s=s.gemm_duration_s, n=n, dtype=dtype, seed=s.seed)
        telemetry = [Finding("burnin.telemetry", Status.SKIP, "no NVML on this node: no GPU telemetry under load")]
    else:
        with Sampler(nvml, indices) as sampler:
            results = run_gemm(backend, indices, duration_s=s.gemm_duration_s, n=n, dtype=dtype, seed=s.seed)
        summary = sampler.summary()
        telemetry = judge_telemetry(summary) + _thermal_spread(summary, sku or ctx.sku)
    # the digests by fleet key, for the allocation step's comparison across the job's nodes and, through
    # the history, the fleet's (healthcheck.analysis.digests)
    ctx.extra["gemm_digests"] = {r.component: [fleet_key(r), r.digest] for r in results if r.digest}
    fleet, problem = _fleet_digests(ctx)
    out = judge_gemm(results, sku, fleet_digests=fleet) + telemetry
    if problem:
        out.append(Finding("burnin.gemm.verify", Status.WARN, problem))
    return out


def _thermal_spread(summary, sku: Sku | None) -> list[Finding]:
    """The hottest GPU vs its siblings at similar power, with the SKU's ``thermal_spread_c`` (data)."""
    from .judge_compute import DEFAULT_SPREAD_C, judge_thermal_spread

    ref = sku.get("thermal_spread_c") if sku is not None else None
    if ref is None:
        return judge_thermal_spread(summary, DEFAULT_SPREAD_C, source="default thermal_spread_c")
    return judge_thermal_spread(summary, ref.value, source=f"{sku.name} thermal_spread_c")


def _phase_soak(ctx: NodeContext) -> list[Finding]:
    from .soak import phase

    backend, devices, _sku = _backend(ctx)
    return phase(ctx, backend, devices, _nvml([d.index for d in devices]) if backend.name != "numpy" else None)


def _phase_recheck(ctx: NodeContext) -> list[Finding]:
    """The node checks again over a fresh snapshot, compared with the checks phase's (pure judges)."""
    from ..pipeline.judge import judge
    from .judge_recheck import judge_load_errors, judge_recheck

    snap, exp = ctx.snapshot()
    verdict = judge(snap, exp, "burnin")
    return judge_recheck(ctx.before_findings, verdict.findings) + judge_load_errors(ctx.before, snap)


LOAD_PHASES = ("gemm", "bandwidth", "dcgm", "nccl", "nic", "storage", "soak")


def _fleet_digests(ctx: NodeContext) -> tuple[dict[str, str] | None, str | None]:
    """The fleet's majority digests: given to the context, or read from the configured file; a file
    that cannot be used is said (a WARN), and the products are then compared within the node and the job."""
    if ctx.fleet_digests is not None or not ctx.settings.fleet_digests:
        return ctx.fleet_digests, None
    from ..safeio.trust import UntrustedFile, check_trusted, running_as_root
    from .fleetfile import FleetFileError, read

    path = ctx.settings.fleet_digests
    try:
        if running_as_root():  # its verdicts drain nodes: as root, a file others can write is refused
            check_trusted(path, "fleet digests file")
        return read(path), None
    except (FleetFileError, UntrustedFile) as exc:
        return None, f"fleet digests not compared: {exc}"
    except OSError as exc:
        return None, f"fleet digests not compared: {path}: {exc.strerror or exc}"


def _phase_bandwidth(ctx: NodeContext) -> list[Finding]:
    from .bandwidth import run_hbm_copy, run_pcie
    from .judge_compute import judge_bandwidth

    backend, devices, sku = _backend(ctx)
    s = ctx.settings
    indices = [d.index for d in devices]
    size = s.bandwidth_bytes if backend.name != "numpy" else min(s.bandwidth_bytes, 64 << 20)
    results = run_hbm_copy(backend, indices, size_bytes=size, repeats=s.bandwidth_repeats)
    results += run_pcie(backend, indices, size_bytes=size, repeats=s.bandwidth_repeats)
    return judge_bandwidth(results, sku)


def _phase_dcgm(ctx: NodeContext) -> list[Finding]:
    from ..parsers import dcgmi
    from .judge_tools import judge_dcgm
    from .tools_run import dcgm_diag, parsed

    run = dcgm_diag(ctx.settings.dcgmi, ctx.settings.dcgm_level, ctx.settings.dcgm_timeout_s)
    diag, problem = parsed(run, dcgmi.parse_diag, dcgmi.DcgmiParseError)
    if diag is not None:
        ctx.extra["dcgm"] = diag.to_dict()
    return judge_dcgm(run, diag, problem)


def _phase_nccl(ctx: NodeContext) -> list[Finding]:
    from .judge_nccl import judge_runs
    from .nccl_run import Sweep, run_on_node

    s = ctx.settings
    _learn_gpus(ctx)
    ngpus = ctx.gpu_count or 1
    sweep = Sweep(max_bytes=s.nccl_max_bytes, iters=s.nccl_iters)
    runs = [run_on_node(s.nccl_dir, c, ngpus, sweep, s.nccl_timeout_s, ctx.node) for c in s.nccl_collectives]
    ctx.extra["nccl"] = [{"collective": r.collective, "scope": r.scope, "argv": r.argv,
                          "result": r.result.to_dict() if r.result else None, "error": r.error} for r in runs]
    sku = ctx.sku or ctx.refs.sku_for(ctx.gpu_name)

    def refs_for(collective: str, _scope: str):
        if sku is None:
            return None, None
        return sku.get(f"nccl_{collective}_busbw_gbps"), sku.get("line_rate_gbps")

    return judge_runs(runs, refs_for, sku.name if sku else ctx.gpu_name, section=sku)


def _phase_nic(ctx: NodeContext) -> list[Finding]:
    """Traffic through every rail of this node (burnin/nic.py): a loopback per HCA port, a NIC-only all_reduce."""
    from .nic import phase

    return phase(ctx)


def _learn_gpus(ctx: NodeContext) -> None:
    """The node's GPU count and model when neither the checks nor a GPU backend said (an nccl-only run,
    nccl.sbatch): the PCI bus for the count, NVML for the model (and so the SKU's references)."""
    if ctx.gpu_count:
        return
    from ..probes.nvml import nvidia_gpu_present

    present = nvidia_gpu_present()
    if not present:
        return
    ctx.gpu_count = len(present)
    if ctx.gpu_name is None:
        nvml = _nvml([0])
        if nvml is not None:
            try:
                name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0))
                ctx.gpu_name = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
            except Exception:  # noqa: BLE001 - the model is a label; the count is what the runs need
                pass
    ctx.sku = ctx.sku or ctx.refs.sku_for(ctx.gpu_name)


def _phase_storage(ctx: NodeContext) -> list[Finding]:
    from ..parsers import fio
    from .judge_tools import judge_storage
    from .tools_run import fio_job, parsed

    s = ctx.settings
    if not s.storage_paths:
        return [Finding("burnin.storage", Status.SKIP, "no storage_paths configured")]
    findings = []
    for path in s.storage_paths:
        ref_sku = ctx.refs.storage_for(path)
        for rw, key in (("write", "write_gbps"), ("read", "read_gbps")):  # write first: read needs the file
            run = fio_job(s.fio, path, rw, s.storage_bytes, s.storage_runtime_s, s.storage_runtime_s * 3 + 60)
            result, problem = parsed(run, fio.parse, fio.FioParseError)
            findings.append(judge_storage(path, rw, run, result, problem, ref_sku.get(key) if ref_sku else None))
    return findings


PHASES: dict[str, Callable[[NodeContext], list[Finding]]] = {
    "checks": _phase_checks, "gemm": _phase_gemm, "bandwidth": _phase_bandwidth, "dcgm": _phase_dcgm,
    "nccl": _phase_nccl, "nic": _phase_nic, "storage": _phase_storage, "soak": _phase_soak}
GPU_PHASES = ("gemm", "bandwidth", "dcgm", "nccl", "nic", "soak")


def deadline(name: str, s: BurninSettings) -> float | None:
    """Seconds a phase that runs GPU work in this process may take before the GPU is taken as hung
    (generous: setup, verification and slow links included); None for phases bounded otherwise (their
    tools run through the subprocess seam with their own deadlines; the probes have budgets)."""
    if name == "gemm":
        return 2 * s.gemm_duration_s + 600
    if name == "soak":  # slices overrun by at most one product each, plus per-slice setup
        return 1.5 * s.soak_duration_s + 600
    if name == "bandwidth":  # HBM and both PCIe directions, at no less than 1 GB/s
        return 600 + 3 * s.bandwidth_repeats * s.bandwidth_bytes / 1e9
    return None


def expected(name: str, s: BurninSettings) -> tuple[float, bool] | None:
    """(seconds, exact) a phase is configured to take: the GEMM's and fio's run times (exact: the phase
    lasts about that long), or the bound of a phase given only a timeout (dcgm, nccl: at most); None when
    the settings say nothing of its length."""
    if name == "gemm":
        return s.gemm_duration_s, True
    if name == "soak":
        return s.soak_duration_s, True
    if name == "storage" and s.storage_paths:
        return s.storage_runtime_s * len(s.storage_paths), True
    if name == "dcgm":
        return s.dcgm_timeout_s, False
    if name == "nccl":
        return s.nccl_timeout_s * max(1, len(s.nccl_collectives)), False
    return None


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t)) + " UTC"


def phase_start_line(node: str, name: str, i: int, total: int, s: BurninSettings, wall: float) -> str:
    """"n1: phase gemm 2/5: start, expected 300 s (ETA 17:10:05 UTC)" (``wall``: the epoch seconds now)."""
    exp = expected(name, s)
    if exp is None:
        eta = "no configured duration"
    elif exp[1]:
        eta = f"expected {exp[0]:.0f} s (ETA {_clock(wall + exp[0])})"
    else:
        eta = f"at most {exp[0]:.0f} s (by {_clock(wall + exp[0])})"
    return f"{node}: phase {name} {i}/{total}: start, {eta}"


def phase_end_line(node: str, name: str, i: int, total: int, took: float, elapsed: float,
                   findings: list[Finding]) -> str:
    """"n1: phase gemm 2/5: done in 301.2 s, worst FAIL (3 findings); 6 min 2 s since the burn-in began"."""
    worst = max((str(f.status) for f in findings), key=lambda st: _SEVERITY.get(st, 0), default=None)
    what = f"worst {worst.upper()} ({len(findings)} finding(s))" if worst is not None else "no finding"
    m, sec = divmod(int(elapsed), 60)
    return f"{node}: phase {name} {i}/{total}: done in {took:.1f} s, {what}; {m} min {sec} s since the burn-in began"


_SEVERITY = {"pass": 0, "skip": 1, "warn": 2, "error": 3, "fail": 4}


def _guarded(ctx: NodeContext, name: str, phase: Callable[[NodeContext], list[Finding]]) -> list[Finding]:
    try:
        return phase(ctx)
    except NoGpuBackend as exc:  # a finding about the node, not a crash of the phase
        return [Finding(f"burnin.{name}", Status.FAIL, str(exc))]
    except Exception as exc:  # noqa: BLE001 - one broken phase must not lose the others
        return [Finding(f"burnin.{name}", Status.ERROR, f"phase crashed: {type(exc).__name__}: {exc}"[:300])]


def _bounded(ctx: NodeContext, name: str, phase: Callable[[NodeContext], list[Finding]],
             limit: float) -> list[Finding]:
    """The phase in a daemon thread, waited for ``limit`` seconds. A GPU that stops answering blocks
    its CUDA call for ever; then the phase FAILs, the node is unusable for the later GPU phases, and
    ``ctx.extra["hung"]`` tells the caller to exit without waiting for the stuck thread."""
    box: list[list[Finding]] = []
    worker = threading.Thread(target=lambda: box.append(_guarded(ctx, name, phase)), name=f"burnin-{name}",
                              daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        ctx.unusable = f"burnin.{name} hung"
        ctx.extra["hung"] = name
        return [Finding(f"burnin.{name}", Status.FAIL, f"did not finish within {limit:.0f} s: a GPU stopped "
                        "answering (hung kernel or copy); the node needs a GPU reset or a reboot")]
    if not box:  # the thread died of a BaseException (SystemExit, KeyboardInterrupt) _guarded does not catch
        return [Finding(f"burnin.{name}", Status.ERROR, "phase ended without a result")]
    return box[0]


def run_node(ctx: NodeContext, started_at: str) -> Verdict:
    """Every enabled phase in order; the verdict of the node (context ``burnin``)."""
    t0 = time.monotonic()
    findings: list[Finding] = []
    enabled = [n for n in PHASES if ctx.settings.phase_on(n)]
    for i, name in enumerate(enabled, 1):
        phase = PHASES[name]
        if ctx.unusable and name in GPU_PHASES:
            findings.append(Finding(f"burnin.{name}", Status.SKIP, f"node unusable ({ctx.unusable})"))
            if ctx.progress:
                ctx.progress(f"{ctx.node}: phase {name} {i}/{len(enabled)}: skipped, node unusable ({ctx.unusable})")
            continue
        ctx.log(f"{ctx.node}: phase {name}")
        if ctx.progress:
            ctx.progress(phase_start_line(ctx.node, name, i, len(enabled), ctx.settings, time.time()))
        p0 = time.monotonic()
        limit = deadline(name, ctx.settings)
        out = _bounded(ctx, name, phase, limit) if limit is not None else _guarded(ctx, name, phase)
        ctx.extra.setdefault("phase_seconds", {})[name] = round(time.monotonic() - p0, 3)
        if ctx.progress:
            ctx.progress(phase_end_line(ctx.node, name, i, len(enabled), time.monotonic() - p0,
                                        time.monotonic() - t0, out))
        findings.extend(out)
    ran_load = any(ctx.settings.phase_on(n) for n in LOAD_PHASES)
    if ctx.before is not None and ctx.snapshot is not None and ran_load and not ctx.extra.get("hung"):
        ctx.log(f"{ctx.node}: node checks again after the load")
        p0 = time.monotonic()
        findings.extend(_guarded(ctx, "recheck", _phase_recheck))
        ctx.extra.setdefault("phase_seconds", {})["recheck"] = round(time.monotonic() - p0, 3)
    return Verdict.of(ctx.node, findings, started_at, time.monotonic() - t0, "burnin")


def node_record(ctx: NodeContext, verdict: Verdict, run_id: str, config_path: str | None) -> dict[str, Any]:
    """The spool "run" record of the node's burn-in, with the burn-in's own facts under "burnin"."""
    from ..spool.entries import run_record

    record = run_record(verdict, run_id, ctx.job_id, config_path, job_nodes=ctx.job_nodes)
    record["burnin"] = {"suite": ctx.settings.suite, "node_class": ctx.node_class,
                        "sku": ctx.sku.name if ctx.sku else None,
                        "gpu_name": ctx.gpu_name, "gpu_count": ctx.gpu_count, "backend": ctx.backend_name,
                        "unusable": ctx.unusable, **ctx.extra}
    return record


def write_result(results_dir: str, node: str, record: dict[str, Any]) -> str:
    """``<results_dir>/<node>.json``, written atomically (the allocation step reads it)."""
    from ..safeio.trust import make_private

    make_private(results_dir)
    from ..safeio.atomic import atomic_write

    path = os.path.join(results_dir, f"{node}.json")
    atomic_write(path, json.dumps(record, allow_nan=False, default=str), 0o600)
    return path
