"""``plax.atomic_file.write_atomically``: the backends' caches write through it, so a reader
sees no file or a whole one, never a partial write, and no temporary file is left behind."""
from __future__ import annotations

import os
import threading

import pytest

from plax.atomic_file import write_atomically


def test_writes_bytes_and_text(tmp_path):
    path = tmp_path / "a.bin"
    write_atomically(path, b"\x00\x01binary")
    assert path.read_bytes() == b"\x00\x01binary"
    write_atomically(str(path), "naïve text")  # replaces; str as UTF-8
    assert path.read_bytes() == "naïve text".encode("utf-8")
    assert os.listdir(tmp_path) == ["a.bin"]


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "cache.pkl"
    path.write_bytes(b"old")

    def no_rename(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, b"new contents")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["cache.pkl"]


def test_rejects_objects_that_are_not_bytes_or_text(tmp_path):
    with pytest.raises(TypeError, match="bytes or str, got dict.*pickle"):
        write_atomically(tmp_path / "x", {"not": "bytes"})
    assert os.listdir(tmp_path) == []


def test_missing_directory_is_an_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "no_such_dir" / "x", b"")


def test_concurrent_writers_of_one_path_leave_one_whole_file(tmp_path):
    # every thread writes a different, large payload to the same path: whichever rename wins,
    # the file is exactly one writer's payload (no interleaving), with no temporaries left
    path = tmp_path / "kernel.cubin"
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=write_atomically, args=(path, p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_bytes() in payloads
    assert os.listdir(tmp_path) == ["kernel.cubin"]
