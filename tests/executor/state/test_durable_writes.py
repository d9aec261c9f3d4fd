"""The state path's writes are whole and durable even when the OS writes less than asked, and every
directory they create is fsynced into its parent (executor/state/storage.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamapp.executor.state import storage


def short_writes(monkeypatch: pytest.MonkeyPatch, most: int) -> list[int]:
    """`os.write` as the storage module sees it writes at most `most` bytes a call (as a signal, a full
    device or a write over ~2 GiB makes it); returns the sizes it wrote."""
    real = os.write
    sizes: list[int] = []

    def write(fd: int, data: bytes | memoryview) -> int:
        done = real(fd, bytes(data[:most]))
        sizes.append(done)
        return done

    monkeypatch.setattr(storage.os, "write", write)
    return sizes


@pytest.mark.parametrize("writer", [storage.write_atomic, storage.create_exclusive])
def test_a_short_write_is_completed_not_published_torn(
    writer: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = short_writes(monkeypatch, 1000)
    data = bytes(range(256)) * 40  # 10,240 bytes
    target = tmp_path / "segments" / "p=0" / "1.parquet"
    writer(target, data)  # type: ignore[operator]
    assert target.read_bytes() == data
    assert len(sizes) == 11 and sum(sizes) == len(data)


def test_every_directory_created_is_fsynced_into_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    real = storage.fsync_dir
    monkeypatch.setattr(storage, "fsync_dir", lambda d: (synced.append(Path(d)), real(d)))
    storage.write_atomic(tmp_path / "a" / "b" / "c" / "file", b"x")
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    synced.clear()
    storage.create_exclusive(tmp_path / "a" / "b" / "other", b"y")
    assert synced == [tmp_path / "a" / "b"], "existing directories are not created again"


def test_a_write_that_makes_no_progress_fails_instead_of_spinning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.os, "write", lambda fd, data: 0)
    with pytest.raises(OSError, match="no progress"):
        storage.write_atomic(tmp_path / "f", b"data")
    assert not (tmp_path / "f").exists()
