"""The shared store as a set of named blobs: what the commit protocol needs, and nothing more.

Every reader and writer of an app's shared store (manifests, changelog segments, snapshots, outputs)
goes through `BlobStore`, whose names are `/`-separated and relative to the store's root. Two
implementations keep the same guarantees:

* `FileStore` — a directory (local, a ReadWriteMany volume, NFS): `storage.write_atomic` and
  `storage.create_exclusive` (temporary file + rename/link) give complete-or-absent and create-if-absent.
* `s3store.S3Store` — a bucket prefix on an S3-API server: a PUT is complete-or-absent by itself, and
  create-if-absent is a PUT with `If-None-Match: *`.

What the protocol relies on: `put` and `create` publish a blob whole or not at all; of several `create`s
racing for one name exactly one returns True; a `get` or `exists` after a `put`/`create` returned sees it
(read-after-write); `names` lists every blob published before the call (list-after-write).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlparse

from streamapp.executor.state import storage
from streamapp.executor.state.keys import join


class Writable(Protocol):
    """Where a streamed blob is written (`BlobStore.writer`)."""

    def write(self, data: bytes, /) -> int: ...


class Readable(Protocol):
    """A streamed blob being read (`BlobStore.reader`): `read(n)` returns b"" at the end."""

    def read(self, size: int = -1, /) -> bytes: ...


class BlobStore(Protocol):
    """Named blobs under one root; a missing blob raises FileNotFoundError on `get`."""

    def get(self, name: str) -> bytes:
        """The whole blob; FileNotFoundError when it does not exist."""
        ...

    def put(self, name: str, data: bytes) -> None:
        """Publish `data` under `name` whole (replacing any blob of that name): never seen partial."""
        ...

    def create(self, name: str, data: bytes) -> bool:
        """Publish `data` under `name` only if no blob has that name; True if this call created it."""
        ...

    def writer(self, name: str) -> AbstractContextManager[Writable]:
        """A stream to write a blob of any size into, in bounded memory; published under `name` whole
        when the block ends without an error, and never when it raises."""
        ...

    def reader(self, name: str) -> AbstractContextManager[Readable]:
        """The blob as a stream read front to back in bounded memory; FileNotFoundError when it does
        not exist."""
        ...

    def exists(self, name: str) -> bool: ...

    def delete(self, name: str) -> None:
        """Remove the blob; a missing one is not an error (another member may have swept it)."""
        ...

    def names(self, folder: str) -> list[str]:
        """Base names of the published blobs and of the sub-folders directly under `folder`, unordered."""
        ...

    def sizes(self, folder: str) -> dict[str, int]:
        """Bytes of each published blob directly under `folder`, by base name (one listing)."""
        ...

    def leftovers(self, folder: str) -> list[tuple[str, str]]:
        """Every stored entry under `folder` as (entry name, the published name it stands for).

        Includes what a crashed writer can leave that `names` hides (a filesystem's temporary files),
        so that sweeping a decided batch's losers removes those too.
        """
        ...

    def child(self, folder: str) -> BlobStore:
        """The same store rooted at `folder` (e.g. the default sink under the state root)."""
        ...

    def describe(self) -> str:
        """Where the store is, for messages (a path or an s3:// URI)."""
        ...


class FileStore:
    """A directory as a blob store; names map to paths below `root` (see `storage` for the guarantees)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"FileStore({self.root})"

    def path(self, name: str) -> Path:
        return self.root / name

    def get(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def put(self, name: str, data: bytes) -> None:
        storage.write_atomic(self.path(name), data)

    def create(self, name: str, data: bytes) -> bool:
        return storage.create_exclusive(self.path(name), data)

    def writer(self, name: str) -> AbstractContextManager[BinaryIO]:
        return storage.atomic_writer(self.path(name))

    def reader(self, name: str) -> AbstractContextManager[BinaryIO]:
        return open(self.path(name), "rb")

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)

    def names(self, folder: str) -> list[str]:
        return [path.name for path in storage.visible_files(self.path(folder), "")]

    def sizes(self, folder: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for path in storage.visible_files(self.path(folder), ""):
            with contextlib.suppress(FileNotFoundError):  # deleted by a sweep since the listing
                if path.is_file():
                    found[path.name] = path.stat().st_size
        return found

    def leftovers(self, folder: str) -> list[tuple[str, str]]:
        directory = self.path(folder)
        if not directory.is_dir():
            return []
        return [(entry.name, storage.final_name(entry.name)) for entry in os.scandir(directory)]

    def child(self, folder: str) -> FileStore:
        return FileStore(self.path(folder))

    def describe(self) -> str:
        return str(self.root)


def as_store(root: Path | BlobStore) -> BlobStore:
    """A store from what callers hold: a directory (the long-standing form) or a store already."""
    return FileStore(root) if isinstance(root, Path) else root


def remove_unnamed(store: BlobStore, folder: str, decided: Mapping[str, Collection[str]]) -> int:
    """Delete the blobs of `folder` that belong to a decided batch but that its manifest does not name:
    `decided` maps a batch's file-name prefix to the names its manifest keeps.

    A batch's files are written before its manifest races for the sequence number; attempts that lost,
    died before the race or were fenced leave files no manifest will ever name, and once the sequence
    is decided they are garbage (a filesystem's temporary files of such attempts included). One listing
    serves every batch in `decided`. Returns how many blobs were removed.
    """
    if not decided:
        return 0
    width = len(next(iter(decided)))
    removed = 0
    for entry, final in store.leftovers(folder):
        keep = decided.get(final[:width])
        if keep is not None and entry not in keep:
            with contextlib.suppress(FileNotFoundError):
                store.delete(join(folder, entry))
                removed += 1
    return removed


def open_uri(uri: str, *, check: bool = False) -> BlobStore:
    """The store a `stateStore.uri` names: `s3://bucket/prefix`, `file:///path` or a plain path.

    `check` (an executor starting) first makes sure an S3 server honours conditional writes
    (`S3Store.check_conditional_writes`), which the commit protocol's fencing rests on.

    S3 connection settings (endpoint, region, credentials) come from the environment; see
    `s3store.S3Settings.from_env`.
    """
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        from streamapp.executor.state import s3store  # only S3 users need boto3 loaded

        store = s3store.S3Store.from_uri(uri)
        if check:
            store.check_conditional_writes()
        return store
    if parsed.scheme not in ("", "file") or not parsed.path:
        raise ValueError(f"state store {uri!r}: expected s3://bucket/prefix, file:///path or a path")
    return FileStore(Path(parsed.path))
