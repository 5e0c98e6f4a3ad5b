"""Bundles from support tickets are untrusted: a hostile tarball or bundle directory yields a clear
error (exit 2) or a judged result, never a traceback, a read or write outside the bundle, or a hang.
Both the library (`snapshot_from_bundle`) and the CLI (`healthcheck check --bundle`, a subprocess with
a timeout) are exercised."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import gzip
from pathlib import Path

import pytest

from healthcheck.bundles import archive as bundle_mod
from healthcheck.bundles.archive import BundleError, snapshot_from_bundle
from tests.conftest import FIXTURES

HEALTHY_XML = FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def healthcheck(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", *args], capture_output=True,
                          text=True, errors="replace", timeout=TIMEOUT_S, cwd=ROOT)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def refused(path: Path, *words: str) -> None:
    with pytest.raises(BundleError) as info:
        snapshot_from_bundle(path)
    for word in words:
        assert word in str(info.value)
    proc = healthcheck("check", "--bundle", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for word in words:
        assert word in proc.stderr


# ----------------------------------------------------------------------------------- tarballs


def tarball(path: Path, *members: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def entry(name: str, data: bytes | None = b"x", **attrs) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data) if data is not None else 0
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


@pytest.mark.parametrize("member", [
    entry("/etc/cron.d/evil"),
    entry("bundle/../../escape.txt"),
    entry("bundle/sys", None, type=tarfile.SYMTYPE, linkname="/sys"),
    entry("bundle/nvidia-smi-q-x.xml", None, type=tarfile.SYMTYPE, linkname="../../etc/shadow"),
    entry("bundle/dmesg.txt", None, type=tarfile.LNKTYPE, linkname="/etc/shadow"),
    entry("bundle/dev-null", None, type=tarfile.CHRTYPE, devmajor=1, devminor=3),
    entry("bundle/dmesg.txt", None, type=tarfile.FIFOTYPE),
], ids=["absolute", "dotdot", "symlink-dir", "symlink-file", "hardlink", "chardev", "fifo"])
def test_tar_entries_outside_or_not_regular_are_refused(tmp_path, member):
    archive = tarball(tmp_path / "evil.tar.gz", entry("bundle/meta.json", b'{"hostname": "n1"}'), member)
    refused(archive, "refusing")
    assert not (tmp_path.parent / "escape.txt").exists()


def test_huge_declared_size_is_refused_before_any_data_is_read(tmp_path):
    info = tarfile.TarInfo("bundle/dmesg.txt")
    info.size = 200 * 1024 * 1024  # header only: the data is not even there
    archive = tmp_path / "liar.tar.gz"
    with gzip.open(archive, "wb") as fh:
        fh.write(info.tobuf(format=tarfile.GNU_FORMAT))
    refused(archive, "too large")


def test_highly_compressible_1gib_member_is_refused_without_filling_the_disk(tmp_path):
    """1 GiB of zeros gzips to ~1 MiB: refused from its header (64 MiB per file), nothing extracted."""
    archive = tmp_path / "bomb.tar.gz"
    size = 1024 ** 3
    info = tarfile.TarInfo("bundle/dmesg.txt")
    info.size = size

    class Zeros(io.RawIOBase):
        left = size

        def readable(self):
            return True

        def readinto(self, buf):
            n = min(len(buf), self.left)
            buf[:n] = bytes(n)
            self.left -= n
            return n

    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.addfile(info, io.BufferedReader(Zeros(), 1 << 20))
    assert archive.stat().st_size < 16 * 1024 * 1024
    refused(archive, "too large")


def test_too_many_entries_and_too_much_in_total_are_refused(tmp_path, monkeypatch):
    many = tarball(tmp_path / "many.tar.gz", *(entry(f"bundle/proc/{i}/comm", b"x\n") for i in range(30)))
    total = tarball(tmp_path / "total.tar.gz", *(entry(f"bundle/f{i}", b"y" * 600) for i in range(3)))
    monkeypatch.setattr(bundle_mod, "MAX_MEMBERS", 20)
    monkeypatch.setattr(bundle_mod, "MAX_TOTAL_BYTES", 1000)
    with pytest.raises(BundleError, match="more than 20 entries"):
        snapshot_from_bundle(many)
    with pytest.raises(BundleError, match="too large together"):
        snapshot_from_bundle(total)


def test_limits_are_documented_and_sane():
    assert bundle_mod.MAX_FILE_BYTES == 64 * 1024 * 1024
    assert bundle_mod.MAX_FILE_BYTES <= bundle_mod.MAX_TOTAL_BYTES <= 1024 ** 3
    assert 1000 <= bundle_mod.MAX_MEMBERS <= 200_000


# ------------------------------------------------------------------------------ bundle folders


def folder(tmp_path: Path, name: str = "ticket") -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "meta.json").write_text(json.dumps({"hostname": "gpu017"}))
    return root


@pytest.mark.parametrize("name,target", [
    ("nvidia-smi-q-x.xml", "/etc/shadow"),
    ("dmesg.txt", "../secret.txt"),
    ("sys", "/sys"),
    ("proc", "/proc"),
    ("meta.json", "/etc/passwd"),
])
def test_symlinks_out_of_a_bundle_folder_are_refused(tmp_path, name, target):
    (tmp_path / "secret.txt").write_text("root:HASH:19000::::::\n")
    root = folder(tmp_path)
    if (root / name).exists():
        (root / name).unlink()
    os.symlink(target, root / name)
    refused(root, "refusing symlink", name)


def test_symlink_deep_inside_sys_out_of_the_bundle_is_refused(tmp_path):
    root = folder(tmp_path)
    dev = root / "sys" / "bus" / "pci" / "devices" / "0000:18:00.0"
    dev.mkdir(parents=True)
    os.symlink("/sys/bus/pci/devices", dev / "vendor")
    refused(root, "refusing symlink")


def test_relative_symlinks_inside_the_bundle_are_accepted(tmp_path):
    root = folder(tmp_path)
    (root / "recordings").mkdir()
    (root / "recordings" / "q.xml").write_text(HEALTHY_XML.read_text())
    os.symlink("recordings/q.xml", root / "nvidia-smi-q-x.xml")
    snap = snapshot_from_bundle(root)
    assert snap.node == "gpu017" and snap.gpus is not None and len(snap.gpus) == 8


def test_hard_link_to_a_file_outside_is_refused(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:HASH:19000::::::\n")
    root = folder(tmp_path)
    os.link(secret, root / "dmesg.txt")
    refused(root, "refusing hard link", "dmesg.txt")


def test_fifo_in_a_bundle_folder_is_refused_not_read(tmp_path):
    root = folder(tmp_path)
    os.mkfifo(root / "dmesg.txt")  # a read would block for ever
    refused(root, "refusing non-regular entry", "dmesg.txt")


@pytest.mark.parametrize("name", ["dmesg.txt", "nvidia-smi-q-x.xml"])
def test_200mb_file_is_refused_by_the_per_file_limit(tmp_path, name):
    root = folder(tmp_path)
    with open(root / name, "wb") as fh:  # sparse: costs no disk
        fh.truncate(200 * 1024 * 1024)
    refused(root, "limit", name)


def test_reads_are_bounded_even_past_the_folder_check(tmp_path, monkeypatch):
    root = folder(tmp_path)
    (root / "dmesg.txt").write_text("x" * 100)
    monkeypatch.setattr(bundle_mod, "MAX_FILE_BYTES", 10)
    with pytest.raises(BundleError, match="limit"):
        bundle_mod._text(root, "dmesg.txt")


def test_too_many_entries_in_a_folder_are_refused(tmp_path, monkeypatch):
    root = folder(tmp_path)
    for i in range(30):
        (root / f"junk{i}").write_text("")
    monkeypatch.setattr(bundle_mod, "MAX_MEMBERS", 20)
    with pytest.raises(BundleError, match="more than 20 entries"):
        snapshot_from_bundle(root)


# ------------------------------------------------------------------------------ hostile content


def test_deeply_nested_xml_is_judged_as_an_error_not_a_crash(tmp_path):
    root = folder(tmp_path)
    depth = 100_000
    (root / "nvidia-smi-q-x.xml").write_text(
        '<?xml version="1.0" ?>\n<nvidia_smi_log><gpu id="00000000:18:00.0">' + "<a>" * depth + "x"
        + "</a>" * depth + "</gpu></nvidia_smi_log>\n")
    snap = snapshot_from_bundle(root)
    assert snap.gpus is None and "gpus" in snap.probe_errors
    proc = healthcheck("check", "--bundle", str(root), "--format", "json", "--only", "gpu.ecc.*")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert results and all(r["status"] == "error" for r in results)


def test_entity_expansion_xml_is_refused_as_data(tmp_path):
    root = folder(tmp_path)
    (root / "nvidia-smi-q-x.xml").write_text(
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
        "<nvidia_smi_log>&b;</nvidia_smi_log>")
    snap = snapshot_from_bundle(root)
    assert snap.gpus is None and "ENTITY" in snap.probe_errors["gpus"].message


@pytest.mark.parametrize("meta", [
    b"[" * 100_000,
    b'{"hostname": "n", "probe_errors": ["gpus"]}',
    b'{"hostname": "n", "probe_errors": {"gpus": "boom"}}',
    b"\xff\xfe\x00{",
    b'"just a string"',
], ids=["nested", "errors-list", "error-string", "binary", "not-object"])
def test_malformed_meta_json_is_a_clear_error(tmp_path, meta):
    root = folder(tmp_path)
    (root / "meta.json").write_bytes(meta)
    refused(root, "meta.json")


@pytest.mark.parametrize("payload", [
    b"\xff\xfe\xfa garbage \x80\x81\n" * 50,
    b"[    5.1] NVRM: Xid (PCI:0000:18:00): 79, \x00\x00 GPU has fallen off the bus.\n",
    b"[    5.1] \x1b[2J\x1b]0;owned\x07 NVRM: Xid (PCI:0000:18:00): 48, \x1b[31mDBE\n",
], ids=["non-utf8", "nul", "ansi"])
def test_binary_and_control_bytes_in_dmesg_are_judged(tmp_path, payload):
    root = folder(tmp_path)
    (root / "dmesg.txt").write_bytes(payload)
    snapshot_from_bundle(root)
    for fmt in ("text", "json"):
        proc = healthcheck("check", "--bundle", str(root), "--format", fmt)
        assert proc.returncode in (0, 1), proc.stderr
        assert not RAW_CONTROL.search(proc.stdout), repr(proc.stdout)


def test_binary_garbage_as_nvidia_smi_xml_is_an_error_not_a_crash(tmp_path):
    root = folder(tmp_path)
    (root / "nvidia-smi-q-x.xml").write_bytes(b"\x00\xff<nvidia_smi_log>\x1b[2J\x00" + os.urandom(4096))
    proc = healthcheck("check", "--bundle", str(root), "--format", "json", "--only", "gpu.*")
    assert proc.returncode == 0, proc.stderr
    assert all(r["status"] in ("error", "skip") for r in json.loads(proc.stdout)["results"])


EVIL_NAME = "x\x1b[2J;rm -rf /\r\n\u202eFAKE: PASS\x00\x07"


def test_control_characters_in_the_node_name_never_reach_the_terminal(tmp_path):
    root = folder(tmp_path)
    (root / "meta.json").write_text(json.dumps({"hostname": EVIL_NAME}))
    (root / "nvidia-smi-q-x.xml").write_text(HEALTHY_XML.read_text())
    text = healthcheck("check", "--bundle", str(root))
    assert text.returncode in (0, 1), text.stderr
    assert not RAW_CONTROL.search(text.stdout) and "\u202e" not in text.stdout
    first = text.stdout.splitlines()[0]
    assert first.startswith("x\\x1b[2J;rm -rf /\\r\\n\\u202eFAKE: PASS\\x00\\x07: ")
    js = healthcheck("check", "--bundle", str(root), "--format", "json")
    assert not RAW_CONTROL.search(js.stdout)
    assert json.loads(js.stdout)["node"] == EVIL_NAME  # escaped in transit, intact as data
    prom = healthcheck("check", "--bundle", str(root), "--format", "prometheus")
    assert not RAW_CONTROL.search(prom.stdout)
    assert all(line.count('"') % 2 == 0 for line in prom.stdout.splitlines())


def test_clean_escapes_every_non_printable_and_keeps_the_rest():
    from healthcheck.output.render import clean

    assert clean("gpu017 ok: Ünïcode µs") == "gpu017 ok: Ünïcode µs"
    assert clean("a\x1b[2Jb\nc\td\x00\u202e") == "a\\x1b[2Jb\\nc\\td\\x00\\u202e"
    assert clean(None) == "None"
