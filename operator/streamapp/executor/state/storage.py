"""Durable file primitives for the state path: complete-or-absent writes and create-only-if-absent.

The state path is a local directory or a PVC mount shared by the members of an app. Two guarantees are
all the commit protocol needs from it:

* `write_atomic` — a reader sees either no file or the whole file. The bytes go to a hidden temporary
  file in the same directory, are fsynced, and are renamed into place (`rename(2)` replaces the name in
  one step); the directory is fsynced so the new name survives a crash.
* `create_exclusive` — of several writers racing for one name, exactly one succeeds and the winner's
  file is complete the moment the name appears. See its docstring for why.

Both write every byte (`os.write` may write fewer than asked: a signal, a full pipe, or — on Linux — any
write above ~2 GiB; the rest is written in a loop) and make every directory they create durable too
(`ensure_dir`): a file fsynced into a directory whose own entry was never synced can vanish with it.

Temporary files start with `.tmp-`; listings skip them, and a crash can only leave such orphans behind
(`blobstore.remove_unnamed` sweeps them with the losing attempts' files). `blobstore.FileStore` is the
shared-store interface over these primitives.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TMP_PREFIX = ".tmp-"


def fsync_dir(directory: Path) -> None:
    """Persist the directory entry of a just-created or just-renamed file."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(final: Path) -> Path:
    """A unique hidden sibling of `final` (same directory, hence same filesystem for rename/link)."""
    return final.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{final.name}")


def ensure_dir(directory: Path) -> None:
    """`mkdir -p` whose every new directory survives a crash: each one created is fsynced into its
    parent. Racing creators are fine: a directory someone else made is taken as it is."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(created)
        fsync_dir(created.parent)


def _write_synced(path: Path, data: bytes) -> None:
    """Write all of `data` to a new file and fsync it: `os.write` returns how much it wrote, which may be
    less than asked, so it is called until nothing is left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(f"{path}: write made no progress")
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(final: Path, data: bytes) -> None:
    """Write `data` to `final` so that readers never observe a partial file."""
    ensure_dir(final.parent)
    tmp = temp_path(final)
    _write_synced(tmp, data)
    os.replace(tmp, final)
    fsync_dir(final.parent)


@contextlib.contextmanager
def atomic_writer(final: Path) -> Iterator[BinaryIO]:
    """A file to stream a large blob into, published at `final` whole when the block ends without an
    error (as `write_atomic`, without holding the bytes in memory) and removed when it raises.
    Python's buffered file writes every byte it is given (it loops over short writes itself)."""
    ensure_dir(final.parent)
    tmp = temp_path(final)
    try:
        with open(tmp, "xb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)


def create_exclusive(final: Path, data: bytes) -> bool:
    """Create `final` holding `data` only if no file of that name exists; True if this call created it.

    Why this is atomic: the content is first written and fsynced to a private temporary file, then
    published with `link(2)`. POSIX `link` fails with EEXIST when the new name exists and otherwise adds
    the name in a single directory operation, so among concurrent callers (threads, processes, or hosts
    sharing a POSIX filesystem such as a PVC) exactly one link succeeds. Because the name only ever points
    at an already complete, synced inode, a crash leaves either no file or the whole file — unlike
    `open(O_CREAT|O_EXCL)` followed by `write`, where a crash between the two would leave an empty file
    that claims the name forever. The temporary name is removed afterwards in both cases.
    """
    ensure_dir(final.parent)
    tmp = temp_path(final)
    _write_synced(tmp, data)
    try:
        os.link(tmp, final)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(final.parent)
    return True


def final_name(entry: str) -> str:
    """The published name a directory entry stands for: itself, or the name a temporary file was for."""
    if entry.startswith(TMP_PREFIX):
        return entry[len(TMP_PREFIX) :].split("-", 1)[-1]
    return entry


def visible_files(directory: Path, suffix: str) -> Iterator[Path]:
    """Published files of `directory` ending in `suffix` (temporary files excluded), unordered."""
    if not directory.is_dir():
        return
    for entry in os.scandir(directory):
        if entry.name.endswith(suffix) and not entry.name.startswith(TMP_PREFIX):
            yield Path(entry.path)
