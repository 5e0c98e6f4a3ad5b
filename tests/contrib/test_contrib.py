"""contrib/ stays consistent with the code: the examples validate and declare their hardware; the Grafana
dashboard and alert rules use only metric names and labels `healthcheck check --format prometheus` emits
(rendered from real verdicts with failing and passing checks); units, cron line and slurm.conf snippet
have the shape their consumers need; the textfile wrapper writes atomically, exit 1 being data."""
from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from unittest import mock

import pytest
from ClusterShell.NodeSet import NodeSet
from click.testing import CliRunner

from healthcheck.bundles.archive import snapshot_from_bundle
from healthcheck.cli import cli
from healthcheck.bundles.collect import collect_bundle
from healthcheck.config import default_expectations, load
from healthcheck.core.model import Status
from healthcheck.output.render import render
from healthcheck.probes.live import LiveOptions
from healthcheck.pipeline.judge import judge
from tests.conftest import FIXTURES, ROOT
from tests.fakes.fake_pynvml import FakeNvml, h100_node
from tests.fixtures.proc_builder import build_proc, build_sys
from tests.fixtures.sysfs_builder import SysfsFaults, build_sysfs

CONTRIB = ROOT / "contrib"
EXAMPLES = sorted((CONTRIB / "examples").glob("*.toml"))
# file -> (model token in gpu_model, GPUs, NVLinks per GPU, GPU PCIe gen, IB Gb/s): public SKU facts
SKUS = {"h100-example.toml": ("H100", 8, 18, 5, 400), "h100-sxm-8gpu.toml": ("H100", 8, 18, 5, 400),
        "h200-8gpu.toml": ("H200", 8, 18, 5, 400), "a100-sxm-8gpu.toml": ("A100", 8, 12, 4, 200)}
SWEEP_FLAGS = {"--config", "--dry-run"}  # the only sweep flags contrib may rely on
EXTRA_LABELS = {"instance", "job"}       # added by Prometheus when it scrapes node_exporter
PROMQL_FUNCTIONS = {"count", "max", "min", "sum", "avg", "time", "vector", "rate", "increase", "absent",
                    "max_over_time", "min_over_time", "clamp_min", "clamp_max", "topk", "bottomk"}
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset"}
KERNEL_LOG = ("[    6.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07\n"
              "[  100.000001] NVRM: Xid (PCI:0000:3a:00): 79, pid=1234, GPU has fallen off the bus.\n")


def load_as_user(path: Path):
    """The config as `load` reads it, without the as-root ownership rule (a checkout's permissions are
    not what these tests judge; tests/safety covers the rule)."""
    with mock.patch("healthcheck.safeio.trust.running_as_root", return_value=False):
        return load(str(path))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads_and_declares_its_hardware(path):
    model, gpus, nvlinks, gen, rate = SKUS[path.name]  # a new example is added to SKUS with its facts
    cfg = load_as_user(path)
    assert cfg.classes, "an example describes at least one node class"
    for cls in cfg.classes:
        exp = cfg.expectations_for(next(iter(NodeSet(cls.nodes))))
        assert exp.node_class == cls.name and exp.nvlinks_per_gpu == nvlinks
        assert exp.gpu_count == gpus and model in exp.gpu_model.upper()
        assert exp.pcie_by_kind["gpu"].gen == gen and exp.pcie_by_kind["gpu"].width == 16
        assert exp.ib_port_count == 8 and exp.ib_rate_gbps == rate and exp.ib_link_layer == "InfiniBand"
        assert {"slurmd", "munged", "nvidia-persistenced", "nv-fabricmanager"} <= set(exp.services)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_config_validate(path, monkeypatch):
    monkeypatch.setattr("healthcheck.safeio.trust.running_as_root", lambda: False)
    result = CliRunner().invoke(cli, ["config", "validate", str(path)])
    assert result.exit_code == 0 and "ok (" in result.output and "warning" not in result.output, result.output


@pytest.mark.parametrize("name", [n for n in SKUS if n != "h100-example.toml"])
def test_sku_example_has_burnin_slurm_power_and_temperature(name):
    from healthcheck.policies.references import load as load_refs

    text = (CONTRIB / "examples" / name).read_text()
    cfg = load_as_user(CONTRIB / "examples" / name)
    assert {"suite", "nccl_dir", "fabric"} <= set(cfg.burnin)
    assert "[slurm]" in text and cfg.slurm.prolog_on_fail in ("drain", "warn")
    exp = cfg.expectations_for(next(iter(NodeSet(cfg.classes[0].nodes))))
    assert "warn_margin_c" in exp.thresholds["gpu.temperature"] and \
        exp.thresholds["gpu.power"]["expected_limit_w"] == (400 if name.startswith("a100") else 700)
    assert re.search(r"^#\s+\[[A-Z0-9-]+-DS\]\s+NVIDIA", text, re.M)  # hardware facts name their source
    # the burn-in fabric exists: built in, or in the site references file shipped in contrib/burnin/
    site = cfg.burnin.get("references")
    refs = load_refs(str(CONTRIB / "burnin" / Path(site).name) if site else None)
    fabric = refs.fabrics[cfg.burnin["fabric"]]
    assert fabric.get("nccl_all_reduce_busbw_gbps").value > 0 and fabric.get("line_rate_gbps").unit == "GB/s"


def test_h100_example_judges_a_healthy_h100_node(node_verdicts):
    by = {(f.check, f.component): f.status for f in node_verdicts["healthy"].findings}
    assert by[("gpu.count", None)] is Status.PASS and by[("ib.port.state", None)] is Status.PASS
    assert all(by[("gpu.nvlink.state", f"gpu{i}")] is Status.PASS for i in range(8))


def make_node(root: Path, faults: SysfsFaults | None = None, kernel_log: str = KERNEL_LOG) -> LiveOptions:
    """A fake HGX H100 node (sysfs/proc trees, fake NVML), as tests/bundles/test_bundles.py builds."""
    build_sysfs(root / "sys", faults=faults)
    build_sys(root / "sys", hcas={}, cpu_topology=False, nvidia_driver="550.90.07")
    build_proc(root / "proc", hostname="gpu017", nvidia_driver="550.90.07")
    return LiveOptions(str(root / "sys"), str(root / "proc"), ("slurmd", "munged"), node="gpu017",
                       nvml=FakeNvml(h100_node()), kernel_log=lambda: kernel_log)


@pytest.fixture(scope="module")
def node_verdicts(tmp_path_factory):
    """Verdicts of real judgements: a faulty and a healthy fake HGX H100 node against the H100 example,
    and the recorded nvidia-smi XML of a healthy 8x H100 node against the defaults."""
    base = tmp_path_factory.mktemp("contrib-nodes")
    exp, out = load_as_user(CONTRIB / "examples" / "h100-sxm-8gpu.toml").expectations_for("gpu017"), {}
    faulty = make_node(base / "faulty", SysfsFaults(port_down=frozenset({3})))
    faulty.nvml.gpus[5].remapped_rows = (0, 2, 1, 0)
    healthy = make_node(base / "healthy", kernel_log=KERNEL_LOG.splitlines(keepends=True)[0])
    for name, node in (("faulty", faulty), ("healthy", healthy)):
        path, _ = collect_bundle(str(base / f"{name}.tar.gz"), options=node)
        out[name] = judge(snapshot_from_bundle(path, services=("slurmd", "munged")), exp)
    smi = base / "smi"
    smi.mkdir()
    shutil.copy(FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml", smi / "nvidia-smi-q-x.xml")
    out["smi"] = judge(snapshot_from_bundle(smi), default_expectations())
    return out


@pytest.fixture(scope="module")
def emitted(node_verdicts) -> tuple[set[str], set[str]]:
    statuses = {f.status for f in node_verdicts["faulty"].findings}
    assert Status.FAIL in statuses and Status.PASS in statuses  # failing and passing checks rendered
    names, labels = set(), set()
    for verdict in node_verdicts.values():
        for line in render(verdict, "prometheus").splitlines():
            if line and not line.startswith("#"):
                names.add(re.match(r"[a-zA-Z_:][\w:]*", line).group(0))
                labels.update(re.findall(r'[{,](\w+)="', line))
    return names, labels


def promql_names(expr: str) -> tuple[set[str], set[str], set[str]]:
    """(metric names, label names, function names) used by a PromQL expression."""
    labels: set[str] = set()
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    for block in re.findall(r"\{([^}]*)\}", expr):
        labels.update(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", block))
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    for group in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        labels.update(g.strip() for g in group.split(",") if g.strip())
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"(?<![\w:])\d+(?:\.\d+)?(?:e[+-]?\d+)?", " ", expr)
    metrics, functions = set(), set()
    for m in re.finditer(r"[a-zA-Z_:][\w:]*", expr):
        word, rest = m.group(0), expr[m.end():].lstrip()
        if rest.startswith("("):
            functions.add(word)
        elif word not in PROMQL_KEYWORDS:
            metrics.add(word)
    return metrics, labels, functions


def test_promql_names_parser():
    metrics, labels, functions = promql_names(
        'count by (check) (healthcheck_check_status{node=~"$node", check=~"a.b"} == 3) or vector(0)'
        ' and on(node) time() - healthcheck_last_run_timestamp_seconds[5m] > 1.5e3')
    assert metrics == {"healthcheck_check_status", "healthcheck_last_run_timestamp_seconds"}
    assert labels == {"check", "node"} and functions == {"count", "vector", "time"}


def assert_uses_emitted(expr: str, emitted: tuple[set[str], set[str]], where: str) -> None:
    names, labels = emitted
    metrics, used_labels, functions = promql_names(expr)
    assert metrics, f"{where}: no metric in {expr!r}"
    assert metrics <= names, f"{where}: not emitted: {sorted(metrics - names)}"
    assert used_labels <= labels | EXTRA_LABELS, f"{where}: unknown labels {sorted(used_labels - labels)}"
    assert functions <= PROMQL_FUNCTIONS, f"{where}: unexpected functions {sorted(functions - PROMQL_FUNCTIONS)}"


def all_panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def test_dashboard_shape_and_variables():
    dash = json.loads((CONTRIB / "grafana" / "healthcheck-dashboard.json").read_text())
    assert dash["schemaVersion"] >= 36 and dash["title"] and dash["uid"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource" and variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert variables["node"]["type"] == "query" and variables["node"]["includeAll"]
    ids = [p["id"] for p in all_panels(dash["panels"])]
    queries = [p for p in all_panels(dash["panels"]) if p["type"] != "row"]
    assert len(ids) == len(set(ids)) and len(queries) >= 10
    assert {"stat", "table", "timeseries"} <= {p["type"] for p in queries}
    for panel in queries:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}" and panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
            assert '$node' in target["expr"], f"{panel['title']}: ignores the node variable"


def test_dashboard_uses_only_emitted_metrics(emitted):
    dash = json.loads((CONTRIB / "grafana" / "healthcheck-dashboard.json").read_text())
    exprs = [(p["title"], t["expr"]) for p in all_panels(dash["panels"]) for t in p.get("targets", [])]
    for title, expr in exprs:
        assert_uses_emitted(expr, emitted, f"panel {title!r}")
    used = set().union(*(promql_names(e)[0] for _, e in exprs))
    # the panels the brief asks for: status per check, failing checks over time, GPU temperature, ECC
    assert {"healthcheck_check_status", "healthcheck_node_status", "healthcheck_gpu_temperature_celsius",
            "healthcheck_gpu_ecc_uncorrected_volatile_errors_total"} <= used
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert match, query
            assert_uses_emitted(match.group(1), emitted, f"variable {var['name']}")
            assert match.group(2) in emitted[1]


def test_alert_rules_shape_and_metrics(emitted):
    doc = pytest.importorskip("yaml").safe_load((CONTRIB / "prometheus" / "healthcheck-alerts.yml").read_text())
    rules = [r for group in doc["groups"] for r in group["rules"]]
    assert all(group["name"] for group in doc["groups"]) and len(rules) >= 5
    assert len({r["alert"] for r in rules}) == len(rules)
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert re.fullmatch(r"\d+[smhdwy]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert_uses_emitted(rule["expr"], emitted, f"alert {rule['alert']}")
        for text in rule["annotations"].values():
            for label in re.findall(r"\$labels\.(\w+)", text):
                assert label in emitted[1] | EXTRA_LABELS, f"{rule['alert']}: $labels.{label}"
    exprs = " ".join(r["expr"] for r in rules)
    assert "healthcheck_check_status == 2" in exprs and "healthcheck_last_run_timestamp_seconds" in exprs


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_alert_rules_pass_promtool():
    proc = subprocess.run(["promtool", "check", "rules", str(CONTRIB / "prometheus" / "healthcheck-alerts.yml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


UNITS = sorted([*(CONTRIB / "systemd").glob("*.service"), *(CONTRIB / "systemd").glob("*.timer"),
                *(CONTRIB / "prometheus").glob("*.service"), *(CONTRIB / "prometheus").glob("*.timer")])


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(path.read_text(), source=str(path))
    return parser


def sweep_flags(command: str) -> set[str]:
    return set(re.findall(r"(?<!\S)--[\w-]+", command.split(" sweep ", 1)[1]))


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_units_parse_with_the_sections_systemd_needs(path):
    parser = unit(path)
    kind = "Service" if path.suffix == ".service" else "Timer"
    assert {"Unit", kind, "Install"} <= set(parser.sections()) and parser["Unit"]["Description"]
    if kind == "Service":
        assert parser["Service"]["Type"] == "oneshot" and parser["Service"]["ExecStart"].startswith("/")
        assert re.fullmatch(r"\d+(min|h|s)?", parser["Service"]["TimeoutStartSec"])  # bounded
    else:
        assert parser["Timer"]["OnCalendar"] and parser["Timer"]["Persistent"] in ("true", "false")
        assert (path.parent / parser["Timer"]["Unit"]).is_file()
        assert parser["Install"]["WantedBy"] == "timers.target"


def test_sweep_service_and_timer():
    service = unit(CONTRIB / "systemd" / "healthcheck-sweep.service")["Service"]
    assert " sweep --config /etc/healthcheck/healthcheck.toml" in service["ExecStart"]
    assert sweep_flags(service["ExecStart"]) <= SWEEP_FLAGS
    assert service["ReadWritePaths"] == "/var/lib/healthcheck"
    assert service["PrivateTmp"] == service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "full"
    timer = unit(CONTRIB / "systemd" / "healthcheck-sweep.timer")["Timer"]
    assert timer["Persistent"] == "true" and timer["RandomizedDelaySec"] and "02:15" in timer["OnCalendar"]


def test_textfile_service_sees_the_node_as_jobs_do():
    service = unit(CONTRIB / "prometheus" / "healthcheck-textfile.service")["Service"]
    assert service["ExecStart"].split()[0].endswith("/healthcheck-textfile.sh")
    # a private mount namespace, /dev or kernel log would change what host.mounts, GPU checks, gpu.xid see
    for key in ("ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "ProtectKernelLogs",
                "ReadWritePaths", "ProtectKernelTunables"):
        assert key not in service, key


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_units_pass_systemd_analyze_verify(tmp_path):
    for path in UNITS:  # the installed executables do not exist here: stand /bin/true in for them
        (tmp_path / path.name).write_text(re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", path.read_text(), 0, re.M))
    copies = [str(tmp_path / path.name) for path in UNITS]
    proc = subprocess.run(["systemd-analyze", "verify", *copies], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stdout + proc.stderr


def test_cron_file_has_one_nightly_job_as_root():
    path = CONTRIB / "cron" / "healthcheck-sweep"
    text = path.read_text()
    assert "." not in path.name and text.endswith("\n")  # run-parts ignores names with dots
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    jobs = [ln for ln in lines if not re.match(r"^[A-Za-z_]\w*\s*=", ln)]
    assert len(jobs) == 1
    *times, user, command = jobs[0].split(None, 6)
    assert times == ["15", "2", "*", "*", "*"] and user == "root"  # 5 time fields, user, command
    assert command.startswith("/") and " sweep --config /etc/healthcheck/healthcheck.toml" in command
    assert sweep_flags(command) <= SWEEP_FLAGS and "flock" not in command
    assert "logger" in command or ">>" in command


def test_history_cron_ingests_then_writes_the_fleet_file_with_real_flags():
    from click.testing import CliRunner

    from healthcheck.cli import cli

    path = CONTRIB / "cron" / "healthcheck-history"
    text = path.read_text()
    assert "." not in path.name and text.endswith("\n")
    jobs = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
            and not re.match(r"^[A-Za-z_]\w*\s*=", ln)]
    assert len(jobs) == 1
    *times, user, command = jobs[0].split(None, 6)
    assert times == ["5", "*", "*", "*", "*"] and user == "root" and "logger" in command
    calls = re.findall(r"/healthcheck ([a-z-]+) ([a-z-]+)([^;|}]*)", command)
    assert [c[:2] for c in calls] == [("history", "ingest"), ("burnin", "fleet-digests")]  # ingest first
    for group, sub, rest in calls:  # every flag it uses is one the command has
        helptext = CliRunner().invoke(cli, [group, sub, "--help"]).output
        for flag in re.findall(r"(?<!\S)--?[\w-]+", rest):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helptext), (group, sub, flag)
    assert "-o /shared/healthcheck/fleet-digests.json" in command


WRAPPER = CONTRIB / "prometheus" / "healthcheck-textfile.sh"
FAKE = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_LOG/args"
out=$(readlink "/proc/$$/fd/1")
printf '%s\\n' "$out" > "$FAKE_LOG/stdout"
[ "${FAKE_SILENT:-0}" = 1 ] || printf 'healthcheck_node_status{node="n1",context="check"} 3\\n'
exit "${FAKE_EXIT:-0}"
"""


def run_wrapper(tmp_path: Path, exit_code: int, silent: bool = False, textdir: Path | None = None):
    fake, log, textdir = tmp_path / "healthcheck", tmp_path / "log", textdir or tmp_path / "textfile"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    log.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HEALTHCHECK": str(fake), "FAKE_LOG": str(log),
           "HEALTHCHECK_TEXTFILE_DIR": str(textdir), "FAKE_EXIT": str(exit_code), "FAKE_SILENT": str(int(silent))}
    return subprocess.run(["bash", str(WRAPPER), "--config", "/etc/healthcheck/healthcheck.toml"],
                          capture_output=True, text=True, timeout=60, env=env), log


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see where the output went")
@pytest.mark.parametrize("exit_code, silent, expected", [(0, False, 0), (1, False, 0), (2, False, 2),
                                                         (3, False, 3), (0, True, 3)])
def test_wrapper_writes_atomically_and_only_data_replaces_the_file(tmp_path, exit_code, silent, expected):
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    (textdir / "healthcheck.prom").write_text("old\n")
    proc, log = run_wrapper(tmp_path, exit_code, silent)
    assert proc.returncode == expected, proc.stderr
    assert sorted(p.name for p in textdir.iterdir()) == ["healthcheck.prom"]  # no temporary file left
    target = textdir / "healthcheck.prom"
    # the check wrote to a temporary file in the same directory, not scraped (no .prom suffix)
    written = Path(log.joinpath("stdout").read_text().strip())
    assert written.parent == textdir and written.name.startswith(".healthcheck.prom.")
    assert not written.name.endswith(".prom") and not written.exists()
    assert log.joinpath("args").read_text().split() == [
        "check", "--format", "prometheus", "--config", "/etc/healthcheck/healthcheck.toml"]
    if expected == 0:  # exit 1 = a check failed: data, written, the unit succeeds
        assert target.read_text() == 'healthcheck_node_status{node="n1",context="check"} 3\n'
        assert stat.S_IMODE(target.stat().st_mode) == 0o644
    else:  # 2 config, 3 internal, or no output: the previous file stays (and ages: staleness alert)
        assert target.read_text() == "old\n" and "keeping the previous" in proc.stderr


def test_wrapper_is_valid_bash_and_needs_its_directory(tmp_path):
    syntax = subprocess.run(["bash", "-n", str(WRAPPER)], capture_output=True, text=True, timeout=30)
    assert syntax.returncode == 0 and os.stat(WRAPPER).st_mode & stat.S_IXUSR, syntax.stderr
    proc, log = run_wrapper(tmp_path, 0, textdir=tmp_path / "missing")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    assert not (log / "args").exists()  # the check was not even run


def conf_lines(text: str) -> dict[str, str]:
    lines = (ln.split("#", 1)[0].strip() for ln in text.splitlines())
    return {k.strip(): v.strip() for k, _, v in (ln.partition("=") for ln in lines if "=" in ln)}


def test_slurm_snippet_matches_the_hooks_documentation():
    from healthcheck.deploy.install import slurm_conf_lines

    text = (CONTRIB / "slurm" / "slurm.conf.snippet").read_text()
    snippet = conf_lines(text)
    assert conf_lines(slurm_conf_lines("/etc/healthcheck/hooks")).items() <= snippet.items()
    readme = (ROOT / "prolog_epilog" / "README.md").read_text()
    block = readme.split("## slurm.conf", 1)[1].split("```", 2)[1]
    documented = {k: v for k, v in conf_lines(block).items() if "/" not in v}  # paths are examples there
    assert documented and documented.items() <= snippet.items() and snippet["PrologFlags"] == "Alloc"
    assert re.search(r"^#SchedulerParameters=nohold_on_prolog_fail$", text, re.M)
    text = (CONTRIB / "slurm" / "healthcheck-operator.md").read_text()
    assert "sacctmgr" in text and "AdminLevel=Operator" in text and "AdminLevel=Admin" in text


def test_readme_describes_every_file_and_no_machine_paths():
    readme = (CONTRIB / "README.md").read_text()
    files = [p for p in CONTRIB.rglob("*") if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts]
    assert len(files) >= 12
    for path in files:
        assert path.name in readme or path.stem in readme, f"contrib/README.md does not mention {path.name}"
        text = path.read_text()
        for forbidden in ("/" + "work/", "/" + "root/", "/home/" + "user"):
            assert forbidden not in text, f"{path}: machine path {forbidden}"
