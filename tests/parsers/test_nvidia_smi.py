"""nvidia-smi -q -x / -q parsers: real corpus outputs, own 8x H100 fixtures, faulty variants."""
from __future__ import annotations

from pathlib import Path

import pytest

from healthcheck.core.model import GpuInfo
from healthcheck.parsers import ParseError
from healthcheck.parsers.nvidia_smi import SUMMARY_MESSAGE, parse_nvidia_smi
from tests.conftest import CORPUS, FIXTURES, corpus_params

H100_XML = FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml"
H100_TEXT = FIXTURES / "nvidia-smi" / "q-h100-sxm-8gpu-565.57.01-healthy.txt"
H100_BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]


def corpus(name: str) -> str:
    path = CORPUS / "nvidia-smi" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return path.read_text()


def parse_file(path: Path) -> list[GpuInfo]:
    return parse_nvidia_smi(path.read_text()).gpus


# ------------------------------------------------------------------------------ corpus: all files


@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*"))
def test_corpus_q_outputs_parse(path):
    result = parse_nvidia_smi(path.read_text())
    assert result.gpus, path.name
    assert result.format == ("xml" if path.suffix == ".xml" else "text")
    assert [g.index for g in result.gpus] == list(range(len(result.gpus)))
    for gpu in result.gpus:
        assert not gpu.lost
        assert gpu.pci_bus_id is None or gpu.pci_bus_id.count(":") == 2


@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "summary-*"))
def test_corpus_summary_tables_are_refused(path):
    with pytest.raises(ParseError) as err:
        parse_nvidia_smi(path.read_text())
    assert str(err.value) == SUMMARY_MESSAGE


@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "error-*"))
def test_corpus_error_outputs_give_lost_gpus(path):
    gpus = parse_nvidia_smi(path.read_text()).gpus
    assert len(gpus) == 1
    assert gpus[0].lost is True
    assert "Unable to determine the device handle" in gpus[0].error
    assert gpus[0].pci_bus_id in {"0000:09:00.0", "0000:0b:00.0", "0000:07:00.0"}


# ------------------------------------------------------------------- corpus: the faults they show


def test_a10_remap_pending():
    (gpu,) = parse_nvidia_smi(corpus("q-text-a10-535.129.03-remap-pending.txt")).gpus
    assert (gpu.remap_uncorrectable, gpu.remap_correctable) == (4, 0)
    assert gpu.remap_pending is True and gpu.remap_failure is False
    assert gpu.reset_required is True  # "Reset Required : No", but a pending remap needs a reset
    assert gpu.pci_bus_id == "0000:07:00.0" and gpu.name == "NVIDIA A10"
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate) == (0, 0)
    assert (gpu.temp_slowdown_c, gpu.temp_shutdown_c, gpu.temp_max_operating_c) == (98, 101, 91)
    assert gpu.mem_temperature_c is None and gpu.fabric_state == "not_supported"
    assert (gpu.power_draw_w, gpu.power_limit_w) == (43.89, 150.0)
    assert gpu.throttle_reasons == ["gpu_idle"] and gpu.processes == []


def test_p100_xml_aggregate_single_bit():
    result = parse_nvidia_smi(corpus("q-x-tesla-p100-pcie-510.47.03-aggregate-sbe3.xml"))
    (gpu,) = result.gpus
    assert (result.format, result.driver_version, result.cuda_version) == ("xml", "510.47.03", "11.6")
    assert gpu.ecc_corrected_aggregate == 3 and gpu.ecc_corrected_volatile == 0
    assert gpu.ecc_uncorrected_aggregate == 0
    assert (gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.retired_pages_pending) == (0, 0, False)
    assert gpu.remap_pending is None  # <remapped_rows>N/A</remapped_rows> on Pascal
    assert (gpu.temp_shutdown_c, gpu.temp_slowdown_c) == (85, 82)
    assert gpu.pci_bus_id == "0000:00:04.0"


def test_k80_xml_retired_pages():
    result = parse_nvidia_smi(corpus("q-x-tesla-k80x4-azure-430.26-retired-pages-pending-blacklist.xml"))
    assert result.cuda_version is None  # "Not Found"
    buses = [g.pci_bus_id for g in result.gpus]
    assert buses == ["1580:00:00.0", "2df7:00:00.0", "4968:00:00.0", "f8d6:00:00.0"]
    first, second = result.gpus[0], result.gpus[1]
    assert (first.ecc_corrected_aggregate, first.ecc_uncorrected_aggregate) == (7, 7)
    assert (second.ecc_corrected_aggregate, second.ecc_uncorrected_aggregate) == (34, 4)
    assert (first.retired_pages_sbe, first.retired_pages_dbe) == (1, 1)
    # SOURCES.md: the file carries <pending_blacklist>No</pending_blacklist> on every GPU.
    assert all(g.retired_pages_pending is False for g in result.gpus)
    assert result.gpus[2].retired_pages_sbe == 0
    assert first.processes[0].pid == 58813 and first.processes[0].used_memory_mib == 576


def test_gtx1070_pcie_x1_of_x16():
    gpus = parse_nvidia_smi(corpus("q-x-geforce-gtx1070-384.66-mining-pcie-x1-of-x16-2of6gpus.xml")).gpus
    assert len(gpus) == 2
    assert (gpus[0].pcie_width_current, gpus[0].pcie_width_max) == (1, 16)
    assert (gpus[1].pcie_gen_current, gpus[1].pcie_gen_max) == (2, 2)
    assert gpus[0].ecc_mode_current is None and gpus[0].ecc_corrected_volatile is None
    assert [p.name for p in gpus[0].processes] == ["/usr/lib/xorg/Xorg", "/usr/bin/gnome-shell",
                                                   "./ethminer"]


def test_rtx2080ti_sw_power_cap_and_no_ecc():
    gpus = parse_nvidia_smi(corpus("q-x-geforce-rtx2080ti-410.73-ecc-na-sw-power-cap-active.xml")).gpus
    assert "sw_power_cap" in gpus[1].throttle_reasons
    assert "sw_power_cap" not in gpus[0].throttle_reasons
    for gpu in gpus:
        assert gpu.ecc_mode_current is None
        assert gpu.ecc_corrected_volatile is gpu.ecc_uncorrected_volatile is None
        assert gpu.ecc_corrected_aggregate is gpu.ecc_uncorrected_aggregate is None
        assert gpu.retired_pages_sbe is None
    assert gpus[0].temp_max_operating_c == 89 and gpus[0].mem_temp_max_c is None


def test_h800_ecc_disabled_fabric_completed():
    result = parse_nvidia_smi(corpus("q-text-h800-525.105.17-gpu0-fabric-completed.txt"))
    (gpu,) = result.gpus
    assert gpu.ecc_mode_current is False and gpu.ecc_mode_pending is False
    assert gpu.ecc_corrected_volatile is None and gpu.ecc_uncorrected_aggregate is None
    assert (gpu.fabric_state, gpu.fabric_status) == ("completed", "Success")
    assert gpu.power_limit_w == 700.0 and gpu.power_draw_w == 74.71  # 525-era "Power Readings"
    assert gpu.throttle_reasons == ["gpu_idle"]  # "Clocks Throttle Reasons"
    assert (gpu.temp_slowdown_c, gpu.temp_shutdown_c, gpu.mem_temp_max_c) == (89, 92, 95)
    assert gpu.reset_required is None  # no reset status / recovery action on 525
    assert result.driver_version == "525.105.17"


def test_h100_fabric_fragment_in_progress():
    (gpu,) = parse_nvidia_smi(
        corpus("q-grep-A5-fabric-h100-sxm-vm-570.195.03-state-in-progress-fragment.txt")).gpus
    assert gpu.fabric_state == "in_progress" and gpu.fabric_status is None
    assert gpu.pci_bus_id is None


def test_ecc_errors_fragment():
    (gpu,) = parse_nvidia_smi(
        corpus("q-text-ecc-errors-block-sram-uncorrectable-vol1-agg5-fragment.txt")).gpus
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate) == (1, 5)
    assert (gpu.ecc_corrected_volatile, gpu.ecc_corrected_aggregate) == (0, 0)


def test_row_remapper_annotated_unknown_ecc_mode():
    (gpu,) = parse_nvidia_smi(corpus(
        "q-d-ecc-row-remapper-550.90.07-ecc-mode-unknown-error-remap-pending-annotated.txt")).gpus
    assert gpu.pci_bus_id == "0000:52:00.0"
    assert gpu.remap_pending is True  # "Yes   <===" annotation stripped
    assert gpu.remap_uncorrectable == 1
    assert gpu.ecc_mode_current is None  # "Unknown Error"
    assert gpu.ecc_uncorrected_volatile is None


def test_a100_excerpt_dram_correctable_and_pending_remap():
    (gpu,) = parse_nvidia_smi(
        corpus("q-text-a100-sxm4-80gb-510.73.08-remap-pending-dram-ce177-excerpt.txt")).gpus
    assert (gpu.ecc_corrected_volatile, gpu.ecc_corrected_aggregate) == (177, 177)
    assert (gpu.remap_correctable, gpu.remap_pending) == (1, True)
    assert gpu.pci_bus_id == "0000:10:1c.0" and gpu.name == "NVIDIA A100-SXM4-80GB"


def test_volta_single_double_bit_two_outputs():
    gpus = parse_nvidia_smi(corpus(
        "q-d-ecc-v100-sxm2-32gb-ls-580.105.08-volta-single-double-bit-schema-2gpus.txt")).gpus
    assert [g.pci_bus_id for g in gpus] == ["0000:41:00.0", "0000:61:00.0"]
    assert all(g.ecc_corrected_aggregate == 0 and g.ecc_uncorrected_volatile == 0 for g in gpus)


def test_h100_nvl_healthy_tlimit_thresholds_are_not_temperatures():
    gpus = parse_nvidia_smi(corpus("q-a-text-h100-nvl-x2-550.54.14-healthy.txt")).gpus
    assert len(gpus) == 2
    assert gpus[0].temperature_c == 32 and gpus[0].temp_slowdown_c is None
    assert gpus[0].power_limit_w == 310.0 and gpus[0].fabric_state == "not_supported"
    assert gpus[0].reset_required is False and gpus[0].persistence_mode is True


# ------------------------------------------------------------------------- own fixtures: healthy


def test_h100_xml_healthy_facts():
    result = parse_nvidia_smi(H100_XML.read_text())
    assert (result.format, result.driver_version, result.cuda_version) == ("xml", "565.57.01", "12.7")
    assert result.timestamp == "Thu Nov 14 09:12:44 2024"
    assert [g.pci_bus_id for g in result.gpus] == [f"0000:{b.lower()}:00.0" for b in H100_BUSES]
    for gpu in result.gpus:
        assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.uuid.startswith("GPU-")
        assert gpu.ecc_mode_current is True
        assert (gpu.ecc_corrected_volatile, gpu.ecc_uncorrected_volatile) == (0, 0)
        assert (gpu.remap_uncorrectable, gpu.remap_pending, gpu.remap_failure) == (0, False, False)
        assert gpu.retired_pages_sbe is None  # N/A on Hopper: row remapping instead
        assert (gpu.pcie_gen_current, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 16, 16)
        assert gpu.power_limit_w == 700.0 and gpu.memory_total_mib == 81559
        assert (gpu.fabric_state, gpu.fabric_status) == ("completed", "Success")
        assert (gpu.reset_required, gpu.recovery_action) == (False, "none")  # NVML probe's names
        assert gpu.temp_slowdown_c is None  # T.Limit offsets only
    busy, idle = result.gpus[0], result.gpus[7]
    assert busy.throttle_reasons == [] and idle.throttle_reasons == ["gpu_idle"]
    assert [(p.pid, p.used_memory_mib) for p in busy.processes] == [(2241870, 1526.0)]
    assert idle.processes == []


def test_h100_cross_format_equal():
    xml, text = parse_nvidia_smi(H100_XML.read_text()), parse_nvidia_smi(H100_TEXT.read_text())
    assert text.format == "text"
    assert len(xml.gpus) == 8
    assert xml.gpus == text.gpus
    assert (xml.driver_version, xml.cuda_version, xml.timestamp) == (
        text.driver_version, text.cuda_version, text.timestamp)


# --------------------------------------------------------------------------- own fixtures: faults


def replace_in_gpu(text: str, bus: str, old: str, new: str) -> str:
    """Replace ``old`` (every occurrence) inside the block of GPU ``bus`` only."""
    xml_open = f'<gpu id="00000000:{bus}:00.0">'
    if xml_open in text:
        start = text.index(xml_open)
        end = text.index("</gpu>", start)
    else:
        start = text.index(f"GPU 00000000:{bus}:00.0\n")
        nxt = text.find("\nGPU 00000000:", start + 1)
        end = nxt if nxt >= 0 else len(text)
    block = text[start:end]
    assert old in block, (bus, old)
    return text[:start] + block.replace(old, new) + text[end:]


def line(label: str, value: str, indent: int = 12) -> str:
    """One `Label   : value` line of the -q layout (colon at column 42)."""
    return " " * indent + label.ljust(42 - indent) + ": " + value


FAULTS = {
    "uncorrectable_ecc_gpu3": ("5D", [
        ("<dram_uncorrectable>0<", "<dram_uncorrectable>2<"),
    ], [
        (line("DRAM Uncorrectable", "0"), line("DRAM Uncorrectable", "2")),
    ], 3, {"ecc_uncorrected_volatile": 2, "ecc_uncorrected_aggregate": 2}),
    "remap_pending_gpu4": ("9A", [
        ("<remapped_row_unc>0<", "<remapped_row_unc>1<"),
        ("<remapped_row_pending>No<", "<remapped_row_pending>Yes<"),
    ], [
        (line("Uncorrectable Error", "0", 8), line("Uncorrectable Error", "1", 8)),
        (line("Pending", "No", 8), line("Pending", "Yes", 8)),
    ], 4, {"remap_uncorrectable": 1, "remap_pending": True, "reset_required": True}),
    "hw_slowdown_gpu6": ("BA", [
        ("<clocks_event_reason_hw_slowdown>Not Active<", "<clocks_event_reason_hw_slowdown>Active<"),
        ("<clocks_event_reason_hw_thermal_slowdown>Not Active<",
         "<clocks_event_reason_hw_thermal_slowdown>Active<"),
    ], [
        (line("HW Slowdown", "Not Active", 8), line("HW Slowdown", "Active", 8)),
        (line("HW Thermal Slowdown", "Not Active"), line("HW Thermal Slowdown", "Active")),
    ], 6, {"throttle_reasons": ["gpu_idle", "hw_slowdown", "hw_thermal_slowdown"]}),
    "pcie_x8_gpu2": ("3A", [
        ("<current_link_width>16x<", "<current_link_width>8x<"),
    ], [
        (line("Current", "16x", 16), line("Current", "8x", 16)),
    ], 2, {"pcie_width_current": 8, "pcie_width_max": 16}),
    "recovery_reset_gpu7": ("DB", [
        ("<gpu_recovery_action>None<", "<gpu_recovery_action>Reset<"),
    ], [
        (line("GPU Recovery Action", "None", 4), line("GPU Recovery Action", "Reset", 4)),
    ], 7, {"recovery_action": "gpu_reset", "reset_required": True}),
    "fabric_in_progress_gpu1": ("2A", [
        ("<state>Completed<", "<state>In Progress<"), ("<status>Success<", "<status>N/A<"),
    ], [
        (line("State", "Completed", 8), line("State", "In Progress", 8)),
        (line("Status", "Success", 8), line("Status", "N/A", 8)),
    ], 1, {"fabric_state": "in_progress", "fabric_status": None}),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_faulty_variants_same_facts_in_both_formats(fault):
    bus, xml_edits, text_edits, index, expected = FAULTS[fault]
    xml, text = H100_XML.read_text(), H100_TEXT.read_text()
    for old, new in xml_edits:
        xml = replace_in_gpu(xml, bus, old, new)
    for old, new in text_edits:
        text = replace_in_gpu(text, bus, old, new)
    healthy = parse_file(H100_XML)
    from_xml, from_text = parse_nvidia_smi(xml).gpus, parse_nvidia_smi(text).gpus
    assert from_xml == from_text
    for name, value in expected.items():
        assert getattr(from_xml[index], name) == value, name
    # Only the named GPU changed.
    assert [g for i, g in enumerate(from_xml) if i != index] == [
        g for i, g in enumerate(healthy) if i != index]


def test_lost_gpu_inside_text_block():
    text = H100_TEXT.read_text()
    start = text.index("GPU 00000000:AB:00.0\n")
    end = text.index("\nGPU 00000000:BA:00.0")
    lost_line = "Unable to determine the device handle for GPU 00000000:AB:00.0: Unknown Error"
    text = text[:start] + "GPU 00000000:AB:00.0\n    " + lost_line + "\n" + text[end:]
    gpus = parse_nvidia_smi(text).gpus
    assert len(gpus) == 8
    assert (gpus[5].lost, gpus[5].error, gpus[5].pci_bus_id) == (True, lost_line, "0000:ab:00.0")
    assert gpus[5].uuid is None and not gpus[4].lost and not gpus[6].lost


def test_lost_gpu_error_printed_before_xml():
    xml = H100_XML.read_text()
    start = xml.index('\t<gpu id="00000000:AB:00.0">')
    end = xml.index("</gpu>", start) + len("</gpu>\n")
    xml = xml[:start] + xml[end:]
    text = ("$ nvidia-smi -q -x\n"
            "Unable to determine the device handle for GPU 00000000:AB:00.0: GPU is lost.  "
            "Reboot the system to recover this GPU\n" + xml)
    result = parse_nvidia_smi(text)
    assert result.format == "xml" and len(result.gpus) == 8
    assert result.gpus[7].lost and result.gpus[7].pci_bus_id == "0000:ab:00.0"
    assert "GPU is lost" in result.gpus[7].error
    assert not any(g.lost for g in result.gpus[:7])


def test_prompt_and_trailing_text_around_xml():
    xml = H100_XML.read_text()
    gpus = parse_nvidia_smi("[root@gpu01 ~]# nvidia-smi -q -x\n" + xml + "[root@gpu01 ~]# \n").gpus
    assert gpus == parse_file(H100_XML)


# ------------------------------------------------------------------------------ refusals / edges


def test_truncated_xml_is_a_parse_error():
    xml = H100_XML.read_text()
    with pytest.raises(ParseError, match="truncated"):
        parse_nvidia_smi(xml[: len(xml) // 2])


@pytest.mark.parametrize("doc", [
    '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]>\n<nvidia_smi_log>&a;</nvidia_smi_log>',
    '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<!ENTITY x SYSTEM "file:///etc/passwd">'
    "<nvidia_smi_log/>",
    '<!DOCTYPE nvidia_smi_log SYSTEM "http://example.com/evil.dtd"><nvidia_smi_log/>',
])
def test_entity_and_foreign_doctype_refused(doc):
    with pytest.raises(ParseError, match="ENTITY|DOCTYPE"):
        parse_nvidia_smi(doc)


def test_wrong_root_and_deep_nesting_refused():
    with pytest.raises(ParseError, match="root element"):
        parse_nvidia_smi('<?xml version="1.0" ?><html></html>')
    deep = "<nvidia_smi_log><gpu>" + "<a>" * 200 + "</a>" * 200 + "</gpu></nvidia_smi_log>"
    with pytest.raises(ParseError, match="deep"):
        parse_nvidia_smi(deep)


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("   \n\n", "empty"),
    ("hello world\nfoo : bar\n", "no GPU block"),
    ("        State : In Progress\n", "no GPU block"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
     "the latest NVIDIA driver is installed and running.\n", "could not run"),
])
def test_text_without_gpus_is_a_parse_error(text, message):
    with pytest.raises(ParseError, match=message):
        parse_nvidia_smi(text)


def test_no_devices_found_is_an_empty_list():
    assert parse_nvidia_smi("No devices were found\n").gpus == []


def test_non_text_input_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_nvidia_smi(b"<nvidia_smi_log/>")  # type: ignore[arg-type]


def test_summary_table_message_names_the_commands():
    table = ("+---------------------------------------------------------------+\n"
             "| NVIDIA-SMI 565.57.01   Driver Version: 565.57.01   CUDA Version: 12.7 |\n"
             "|-------------------------------+----------------------+-------+\n"
             "|   0  NVIDIA H100 80GB HBM3  On | 00000000:18:00.0 Off |     0 |\n"
             "+-------------------------------+----------------------+-------+\n")
    with pytest.raises(ParseError, match="nvidia-smi -q -x"):
        parse_nvidia_smi(table)
