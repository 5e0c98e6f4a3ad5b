"""dcgmi diag parser: real corpus (text tables, fragments, srun, JSON), own fixtures (3.x/4.x, JSON), fuzz."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.parsers import ParseError
from healthcheck.parsers.dcgmi import DcgmDiag, DcgmiParseError, DcgmTest, parse_diag
from tests.conftest import CORPUS, FIXTURES, corpus_files, corpus_params
from tests.fuzzing import mutated as fuzz_mutated

FIX = FIXTURES / "dcgmi"
DEPLOYMENT_3X = ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
                 "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]


def _corpus(name: str) -> DcgmDiag:
    path = CORPUS / "dcgmi" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return parse_diag(path.read_text())


def _fixture(name: str) -> DcgmDiag:
    return parse_diag((FIX / name).read_text())


def _test(diag: DcgmDiag, name: str) -> DcgmTest:
    (found,) = [t for t in diag.tests if t.name == name]
    return found


def _serialisable(diag: DcgmDiag) -> dict:
    data = diag.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    return data


# ------------------------------------------------------------------------------------ real corpus


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("dcgmi", "diag-*"))
def test_every_corpus_diag_parses(path: Path):
    diag = parse_diag(path.read_text())
    assert diag.runs >= 1 and diag.tests
    assert all(t.status in {"pass", "fail", "warn", "skip", "info"} for t in diag.tests)
    assert diag.overall in {"pass", "fail", "skip"}
    assert _serialisable(diag)["overall"] == diag.overall


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("dcgmi", "discovery-*"))
def test_discovery_table_is_not_diag_output(path: Path):
    with pytest.raises(DcgmiParseError, match="not dcgmi diag output"):
        parse_diag(path.read_text())


@pytest.mark.corpus
def test_corpus_r1_v100_pass_metadata_and_deployment():
    diag = _corpus("diag-r1-v100-pcie-pass.txt")
    assert (diag.overall, diag.runs, diag.errors) == ("pass", 1, [])
    assert diag.metadata == {"DCGM Version": "3.3.9", "Driver Version Detected": "560.35.03",
                             "GPU Device IDs Detected": "1db4"}
    assert [t.name for t in diag.tests] == DEPLOYMENT_3X
    assert {(t.category, t.status, tuple(t.gpus)) for t in diag.tests} == {("Deployment", "pass", ())}


@pytest.mark.corpus
def test_corpus_r2_verbose_info_rows_rejoined():
    diag = _corpus("diag-r2-verbose-v100-pcie-pass.txt")
    assert diag.overall == "pass"
    pcie = _test(diag, "PCIe")
    assert (pcie.category, pcie.status, pcie.gpus) == ("Integration", "pass", {})
    assert pcie.messages == ["Info: GPU 0 GPU to Host bandwidth: 13.13 GB/s, GPU 0 Host to GPU bandwidth: "
                             "12.37 GB/s, GPU 0 bidirectional bandwidth: 22.39 GB/s, GPU 0 GPU to Host latency: "
                             "2.078 us, GPU 0 Host to GPU latency: 2.211 us, GPU 0 bidirectional latency: 3.957 us"]
    assert _test(diag, "GPU Memory").messages == ["Info: GPU 0 Allocated 16435239282 bytes (97.1%)"]
    assert not [t for t in diag.tests if t.category == "Stress"]  # empty Stress section


@pytest.mark.corpus
def test_corpus_r3_v100_pass_with_eud_skipped():
    diag = _corpus("diag-r3-v100-pcie-pass.txt")
    assert diag.overall == "pass" and len(diag.tests) == 16
    assert [(t.name, t.status) for t in diag.tests if t.category == "Hardware"] == [
        ("GPU Memory", "pass"), ("Diagnostic", "pass")]
    assert _test(diag, "EUD Test").status == "skip"


@pytest.mark.corpus
def test_corpus_r2_fragment_gpu_memory_fail_on_gpu0_with_thermal_warning():
    diag = _corpus("diag-r2-fragment-gpu-memory-fail-gpu0-thermal-violation-warning.txt")
    assert (diag.overall, diag.runs, diag.metadata) == ("fail", 1, {})
    (memory,) = diag.tests
    assert (memory.category, memory.name, memory.status) == (None, "GPU Memory", "fail")
    assert memory.gpus == {0: "fail", **{gpu: "pass" for gpu in range(1, 8)}}
    assert memory.messages == [
        "Warning: GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 "
        "Verify that the cooling on this machine is functional, including external, thermal material interface, "
        "fans, and any other components."]


@pytest.mark.corpus
def test_corpus_r3_fragment_deployment_error_row_without_test_row():
    diag = _corpus("diag-r3-fragment-deployment-error-gpu3-row-remap-pending.txt")
    assert diag.overall == "fail"
    (error,) = diag.tests
    assert (error.category, error.name, error.status) == ("Deployment", "Error", "fail")
    assert error.messages == ["Error: GPU 3 has uncorrectable memory errors and row remappings are pending"]


@pytest.mark.corpus
def test_corpus_srun_two_tasks_all_skip_tested_nothing():
    diag = _corpus("diag-r3-srun-2task-rtxpro6000-all-skip.txt")
    assert (diag.runs, diag.overall, diag.errors) == (2, "skip", [])
    assert len(diag.tests) == 30
    assert diag.metadata == {"DCGM Version": "3.3.9", "Driver Version Detected": "570.172.08",
                             "GPU Device IDs Detected": "2bb5,2bb5"}
    heavy = [t for t in diag.tests if t.category != "Deployment"]
    assert len(heavy) == 12 and {t.status for t in heavy} == {"skip"}
    assert {t.status for t in diag.tests if t.category == "Deployment"} == {"pass"}


@pytest.mark.corpus
def test_corpus_json_dcgm31_after_warning_line_with_nulls():
    diag = _corpus("diag-json-dcgm3.1.0-8gpu-level1-pass-nulls-warning-prefix-dcgm-unittest.txt")
    assert (diag.overall, diag.runs, diag.errors) == ("pass", 1, [])  # the WARNING line is not an error
    assert diag.metadata == {"DCGM Version": "3.1.0"}
    assert [t.name for t in diag.tests][:2] == ["Denylist", "NVML Library"] and len(diag.tests) == 10
    assert all(t.gpus == {gpu: "pass" for gpu in range(8)} for t in diag.tests)  # CSV and int gpu_ids
    assert (diag.tests[-1].category, diag.tests[-1].name) == ("Custom", "software")


# ---------------------------------------------------------------------------------- own fixtures


def test_fixture_dcgm3_r3_h100_pass():
    diag = _fixture("diag-r3-dcgm3.3.8-h100x8-pass.txt")
    assert (diag.overall, diag.runs, diag.errors) == ("pass", 1, [])
    assert diag.metadata["GPU Device IDs Detected"] == ",".join(["2330"] * 8)
    assert [t.category for t in diag.tests].count("Stress") == 4
    assert [t.name for t in diag.tests if t.status != "pass"] == ["EUD Test"]


def test_fixture_dcgm3_pcie_fail_on_gpu5_with_wrapped_warning():
    diag = _fixture("diag-r2-dcgm3.3.8-h100x8-pcie-fail-gpu5-verbose.txt")
    assert diag.overall == "fail"
    pcie = _test(diag, "PCIe")
    assert pcie.status == "fail"
    assert pcie.gpus == {**{g: "pass" for g in (0, 1, 2, 3, 4, 6, 7)}, 5: "fail"}
    assert pcie.messages[0] == ("Warning: Detected more than 8 PCIe replays per minute for GPU 5 : 73 Reconnect "
                                "PCIe card. Run system side PCIE diagnostic utilities to verify hops off the GPU "
                                "board. If issue is on the board, run the field diagnostic.")
    assert pcie.messages[1].startswith("Info: GPU 5 GPU to Host bandwidth: 24.87 GB/s, GPU 5 Host")
    memory = _test(diag, "GPU Memory")
    assert memory.status == "pass" and len(memory.messages) == 8
    assert memory.messages[7] == "Info: GPU 7 Allocated 84468137984 bytes (98.3%)"


def test_fixture_dcgm4_text_entity_rows_and_entity_warning():
    diag = _fixture("diag-r3-dcgm4.2.3-h100nvl-x4-memory-fail-gpu2.txt")
    assert (diag.overall, diag.runs) == ("fail", 1)
    assert diag.metadata == {"DCGM Version": "4.2.3", "Driver Version Detected": "570.133.20",
                             "GPU Device IDs Detected": "2321, 2321, 2321, 2321"}
    assert [(t.category, t.name) for t in diag.tests] == [
        ("Deployment", "software"), ("Hardware", "memory"), ("Hardware", "diagnostic"), ("Integration", "pcie"),
        ("Stress", "memory_bandwidth"), ("Stress", "targeted_stress"), ("Stress", "targeted_power")]
    memory = _test(diag, "memory")
    assert memory.status == "fail" and memory.gpus == {0: "pass", 1: "pass", 2: "fail", 3: "pass"}
    assert memory.messages == ["Warning: GPU2: A memory mismatch was detected on GPU 2, but no error was "
                               "reported by CUDA or NVML. Run a field diagnostic on the GPU."]
    power = _test(diag, "targeted_power")
    assert power.status == "skip" and set(power.gpus.values()) == {"skip"}


def test_fixture_srun_label_two_interleaved_tasks():
    diag = _fixture("diag-r1-dcgm3.3.8-srun-label-2tasks-task1-page-retirement.txt")
    assert (diag.runs, diag.overall, len(diag.tests)) == (2, "fail", 18)
    assert [t.name for t in diag.tests] == DEPLOYMENT_3X * 2
    failed = [t for t in diag.tests if t.status != "pass"]
    assert [(t.name, t.status, t.messages) for t in failed] == [
        ("Page Retirement/Row Remap", "fail", ["Error: A pending retired page has been detected in GPU 0."])]
    assert diag.errors == ["srun: error: gpu-b112: task 1: Exited with exit code 226"]
    assert diag.metadata["GPU Device IDs Detected"] == "2330"


def test_fixture_no_hostengine_is_errors_only():
    diag = _fixture("diag-error-no-hostengine.txt")
    assert (diag.tests, diag.runs, diag.overall) == ([], 0, "fail")
    assert diag.errors == ["Error: unable to establish a connection to the specified host: localhost",
                           "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."]


def test_fixture_dcgm4_json_pass():
    diag = _fixture("diag-r1-dcgm4.2.3-h100nvl-x4-json-pass.json")
    assert (diag.overall, diag.runs) == ("pass", 1)
    assert diag.metadata == {"DCGM Version": "4.2.3", "Driver Version Detected": "570.133.20",
                             "GPU Device IDs Detected": "2321, 2321, 2321, 2321"}
    (software,) = diag.tests
    assert (software.category, software.name, software.status) == ("Deployment", "software", "pass")
    assert software.gpus == {0: "pass", 1: "pass", 2: "pass", 3: "pass"}


def test_fixture_dcgm4_json_memory_fail_summary_warning_not_repeated():
    diag = _fixture("diag-r2-dcgm4.2.3-h100nvl-x4-json-memory-fail-gpu1.json")
    assert diag.overall == "fail"
    memory = _test(diag, "memory")
    assert memory.status == "fail" and memory.gpus == {0: "pass", 1: "fail", 2: "pass", 3: "pass"}
    warnings = [m for m in memory.messages if m.startswith("Warning")]
    assert warnings == ["Warning: GPU1: A memory mismatch was detected on GPU 1, but no error was reported by "
                        "CUDA or NVML. Run a field diagnostic on the GPU."]
    assert "Info: GPU3: Allocated 89032232141 bytes (93.2%)" in memory.messages
    pcie = _test(diag, "pcie")
    assert pcie.messages[0] == ("Info: GPU0: GPU 0 GPU to Host bandwidth: 25.31 GB/s, GPU 0 Host to GPU "
                                "bandwidth: 26.02 GB/s, GPU 0 bidirectional bandwidth: 50.77 GB/s")


def test_fixture_dcgm3_json_thermal_warn_and_pcie_skipped():
    diag = _fixture("diag-r2-dcgm3.3.8-h100x8-json-thermal-warn-gpu3.json")
    assert diag.overall == "warn"
    assert diag.metadata == {"DCGM Version": "3.3.8", "Driver Version Detected": "550.90.07",
                             "GPU Device IDs Detected": ", ".join(["2330"] * 8)}
    memory = _test(diag, "GPU Memory")
    assert memory.status == "warn" and memory.gpus[3] == "warn" and memory.gpus[0] == "pass"
    assert memory.messages[0].startswith("Warning: GPU3: GPU 3 Thermal violations totaling 4.2 seconds")
    assert _test(diag, "PCIe").gpus == {gpu: "skip" for gpu in range(8)}


def test_fixture_json_runtime_error():
    diag = _fixture("diag-dcgm4.2.3-json-runtime-error-paused.json")
    assert diag.errors == ["Error: Diagnostic could not be run while DCGM is paused."]
    assert (diag.tests, diag.overall, diag.metadata) == ([], "fail", {"DCGM Version": "4.2.3"})


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("diag-*")))
def test_every_fixture_round_trips_to_json(name):
    data = _serialisable(_fixture(name))
    assert set(data) == {"overall", "runs", "metadata", "errors", "tests"}
    assert all(set(t) == {"category", "name", "status", "gpus", "messages"} for t in data["tests"])


# ------------------------------------------------------------------------------------- edge cases

ROW = "| {:<25} | {:<46} |"


def test_overall_rules():
    def diag(*tests, errors=()):
        return DcgmDiag(tests=[DcgmTest(c, n, s) for c, n, s in tests], errors=list(errors))
    assert diag().overall == "skip"
    assert diag(("Deployment", "software", "pass")).overall == "pass"
    assert diag(("Deployment", "software", "skip")).overall == "skip"
    assert diag(("Deployment", "a", "pass"), ("Hardware", "b", "skip")).overall == "skip"
    assert diag(("Deployment", "a", "pass"), ("Hardware", "b", "pass"), ("Stress", "c", "skip")).overall == "pass"
    assert diag(("Hardware", "b", "pass"), ("Stress", "c", "unknown")).overall == "warn"
    assert diag(("Hardware", "b", "warn"), ("Stress", "c", "fail")).overall == "fail"
    assert diag(("Hardware", "b", "pass"), errors=["Error: x"]).overall == "fail"
    assert diag(("Hardware", "b", "pass"), (None, "Info", "info")).overall == "pass"


def test_dcgm4_padded_category_rows_global_warning_and_cpu_entity():
    text = "\n".join([
        "| Diagnostic                | Result                                         |",
        "| -----  Metadata  ----------+------------------------------------------------ |",
        ROW.format("DCGM Version", "4.4.1"), ROW.format("CPU Device IDs Detected", "0x7e"),
        ROW.format("Number of CPUs Detected", "2"),
        "| -----  Hardware  ----------+------------------------------------------------ |",
        ROW.format("cpu_eud", "Warn"), ROW.format("Warning", "Global warning text"),
        ROW.format("", "CPU0: Pass"), ROW.format("", "CPU1: Warn"),
        ROW.format("Info: CPU1", "cpu info"), ROW.format("Warning: CPU1", "cpu warning"),
        ROW.format("memory", ""), ROW.format("", "GPU0: Not Run")])
    diag = parse_diag(text)
    assert diag.metadata == {"DCGM Version": "4.4.1", "CPU Device IDs Detected": "0x7e",
                             "Number of CPUs Detected": "2"}
    eud = _test(diag, "cpu_eud")
    assert (eud.category, eud.status, eud.gpus) == ("Hardware", "warn", {})
    assert eud.messages == ["Warning: Global warning text", "Info: CPU1: cpu info", "Warning: CPU1: cpu warning"]
    memory = _test(diag, "memory")
    assert memory.status == "skip" and memory.gpus == {0: "skip"}
    assert diag.overall == "warn"


def test_unknown_status_word_and_orphan_info_and_warning_rows():
    text = "\n".join(["+-----  Stress  ------------+------------------------------------------------+",
                      ROW.format("Info", "orphan info"), ROW.format("Pulse Test", "Pass - All"),
                      ROW.format("Memtest", "Degraded"), "", ROW.format("Warning", "cut before its test")])
    diag = parse_diag(text)
    assert [(t.category, t.name, t.status) for t in diag.tests] == [
        ("Stress", "Info", "info"), ("Stress", "Pulse Test", "pass"), ("Stress", "Memtest", "unknown")]
    assert diag.tests[0].messages == ["Info: orphan info"] and diag.overall == "warn"
    assert diag.runs == 1  # the Warning after the blank line is outside any table: not anchored, ignored


def test_message_chunk_ending_in_a_space_keeps_the_word_gap():
    words = "abcd " * 9 + "efgh"  # the first 45-character chunk ends with a space
    text = "\n".join([ROW.format("GPU Memory", "Fail - All"), ROW.format("Warning", words[:45]),
                      ROW.format("", words[45:])])
    (memory,) = parse_diag(text).tests
    assert memory.messages == ["Warning: " + " ".join(words.split())]
    assert memory.gpus == {}


def test_errors_with_continuation_lines_and_iteration_abort():
    text = ("Running iteration 1 of 2...\nSuccessfully ran diagnostic for group.\n"
            + ROW.format("Denylist", "Pass") + "\n"
            "Error: Unable to complete diagnostic for group 2. Return: (-3) : Generic unspecified error\n"
            "A GPU was not found in the group\n"
            "root@node:~# \n"
            "Aborting the iterative runs of the diagnostic due to failure: Generic unspecified error\n")
    diag = parse_diag(text)
    assert diag.errors == ["Error: Unable to complete diagnostic for group 2. Return: (-3) : Generic unspecified "
                           "error A GPU was not found in the group",
                           "Aborting the iterative runs of the diagnostic due to failure: Generic unspecified error"]
    assert (diag.runs, diag.overall) == (1, "fail")


def test_json_iterations_and_concatenated_documents():
    run = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "GPU Memory", "results": [{"gpu_id": "0", "status": "Pass"}, None, {"gpu_id": 1, "status": "Fail",
                                            "warnings": ["plain string warning"], "info": "one info"}]}]}],
        "version": "3.3.5", "Driver Version Detected": "535.183.01"}}
    doc = json.dumps({"iterations": [run, run], "Overall Result": "Fail", "warning": "The diagnostic failed"})
    diag = parse_diag(f"prompt$ dcgmi diag -r 2 -j --iterations 2\n{doc}\n{json.dumps(run, indent=2)}\ntrailer\n")
    assert diag.runs == 3 and len(diag.tests) == 3
    assert diag.errors == ["Overall Result: Fail: The diagnostic failed"]
    memory = diag.tests[0]
    assert memory.gpus == {0: "pass", 1: "fail"}
    assert memory.messages == ["Warning: GPU1: plain string warning", "Info: GPU1: one info"]
    assert diag.metadata == {"DCGM Version": "3.3.5", "Driver Version Detected": "535.183.01"}


def test_json_metadata_that_differs_between_runs_is_joined():
    docs = [json.dumps({"DCGM Diagnostic": {}, "metadata": {"version": v}}) for v in ("4.1.1", "4.2.3", "4.1.1")]
    diag = parse_diag("\n".join(docs))
    assert diag.metadata == {"DCGM Version": "4.1.1; 4.2.3"} and diag.runs == 3 and diag.overall == "skip"


@pytest.mark.parametrize("doc, where", [
    ({"DCGM Diagnostic": []}, "$.DCGM Diagnostic"),
    ({"DCGM Diagnostic": {"test_categories": {}}}, "test_categories"),
    ({"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": [{"gpu_ids": "0,x"}]}]}]}}, "bad GPU id"),
    ({"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": [{"entity_id": "0"}]}]}]}}, "entity_id"),
    ({"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": [{"warnings": [{"warning": {}}]}]}]}]}},
     "warnings"),
    ({"DCGM Diagnostic": {}, "metadata": "4.2.3"}, "metadata"),
    ({"iterations": None}, "neither"),
])
def test_json_of_the_wrong_shape_raises_naming_the_field(doc, where):
    with pytest.raises(DcgmiParseError, match="dcgmi diag JSON") as info:
        parse_diag(json.dumps(doc))
    assert where in str(info.value)


def test_truncated_json_raises():
    text = (FIX / "diag-r1-dcgm4.2.3-h100nvl-x4-json-pass.json").read_text()
    with pytest.raises(DcgmiParseError, match="cut short"):
        parse_diag(text[: len(text) // 2])


@pytest.mark.parametrize("bad", ["", " \n\t\n", "hello world\n", "| a | b |\n| c | d |\n", "{}", "[1, 2]\n",
                                 "Successfully ran diagnostic for group.\n",
                                 "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5f1b2c1e)\n"])
def test_non_diag_text_raises(bad):
    with pytest.raises(DcgmiParseError):
        parse_diag(bad)


@pytest.mark.parametrize("bad", [None, 7, ["| Denylist | Pass |"]])
def test_non_text_raises(bad):
    with pytest.raises(DcgmiParseError, match="must be text"):
        parse_diag(bad)


def test_error_type_is_the_package_parse_error_and_bytes_are_decoded():
    assert issubclass(DcgmiParseError, ParseError) and issubclass(DcgmiParseError, ValueError)
    (test,) = parse_diag(ROW.format("Denylist", "Pass").encode() + b"\n\xff\n").tests
    assert (test.name, test.status) == ("Denylist", "pass")


# ------------------------------------------------------------------------------------------- fuzz

SEEDS = [p.read_text() for p in sorted(FIX.glob("diag-*"))] + [
    p.read_text() for p in corpus_files("dcgmi", "*.txt")]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(text) -> None:
    try:
        diag = parse_diag(text)
    except DcgmiParseError:
        return
    assert isinstance(diag, DcgmDiag) and diag.runs >= 0
    assert all(isinstance(t, DcgmTest) and isinstance(t.name, str) for t in diag.tests)
    assert all(t.status in {"pass", "fail", "warn", "skip", "info", "unknown"} for t in diag.tests)
    assert all(isinstance(g, int) for t in diag.tests for g in t.gpus)
    assert diag.overall in {"pass", "fail", "warn", "skip"}
    _serialisable(diag)


@FUZZ
@given(st.text())
def test_fuzz_any_text(text):
    _check(text)


@FUZZ
@given(fuzz_mutated(SEEDS))
def test_fuzz_mutated_real_output(text):
    _check(text)


@FUZZ
@given(st.lists(st.sampled_from(["|", "+", "-----  Hardware  ---", " Pass - GPUs: 0, 1", "Fail - All", "GPU0: ",
                                 "Warning: GPU1", "Info", "Error: x", "\n", "{", "}", '"DCGM Diagnostic"', ":",
                                 '"gpu_ids"', "null", "[", "]", "0: ", " "]), max_size=60))
def test_fuzz_format_pieces(pieces):
    _check("".join(pieces))
