"""One bounded read loop (safety.read_bounded) under every reader of files we do not control:
the trusted-file reader, the bundle's top-level files and the bundle extractor."""
from __future__ import annotations

import os

import pytest

from healthcheck.bundles import archive as bundle
from healthcheck.bundles import files as bundle_files
from healthcheck.safeio import trust as safety


def _fd(path):
    return os.open(path, os.O_RDONLY)


def test_read_bounded_stops_at_the_limit_and_at_end_of_file(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"0123456789")
    for limit, want in ((4, b"0123"), (10, b"0123456789"), (11, b"0123456789"), (0, b"")):
        fd = _fd(f)
        try:
            assert safety.read_bounded(fd, limit) == want
        finally:
            os.close(fd)


def test_read_bounded_reads_past_one_chunk(tmp_path):
    f = tmp_path / "big"
    data = os.urandom(3 * (1 << 20) + 17)
    f.write_bytes(data)
    fd = _fd(f)
    try:
        assert safety.read_bounded(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def test_every_reader_uses_the_one_loop():
    assert bundle_files.read_bounded is safety.read_bounded


def test_a_bundle_file_over_the_limit_is_refused_with_its_name(tmp_path, monkeypatch):
    (tmp_path / "dmesg.txt").write_text("x" * 100)
    monkeypatch.setattr(bundle, "MAX_FILE_BYTES", 10)
    with pytest.raises(bundle.BundleError, match="bundle file dmesg.txt is 100 bytes, over the limit of 10"):
        bundle._text(tmp_path, "dmesg.txt")
    monkeypatch.setattr(bundle, "MAX_FILE_BYTES", 100)
    assert bundle._text(tmp_path, "dmesg.txt") == "x" * 100


def test_a_bundle_file_that_grows_while_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "dmesg.txt"
    path.write_text("x" * 10)
    real_fstat = os.fstat

    def grown(fd):  # the file grew between the stat and the read: the read still stops at limit + 1
        st = real_fstat(fd)
        path.write_text("x" * 50)
        return st

    monkeypatch.setattr(bundle, "MAX_FILE_BYTES", 20)
    monkeypatch.setattr(safety.os, "fstat", grown)
    with pytest.raises(bundle.BundleError, match="grew over 20 bytes"):
        bundle._text(tmp_path, "dmesg.txt")


def test_an_unreadable_bundle_file_is_a_bundle_error(tmp_path, monkeypatch):
    (tmp_path / "dmesg.txt").write_text("x")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(safety.os, "open", denied)
    with pytest.raises(bundle.BundleError, match="dmesg.txt: cannot read: Permission denied"):
        bundle._text(tmp_path, "dmesg.txt")
