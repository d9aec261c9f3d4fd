"""A partition's local store in LMDB on the member's volume, for state larger than memory.

Chosen over RocksDB (through rocksdict) by measurement (`bench/localstores.py`, recorded in
`bench/results/localstores.md`): at 20M keys LMDB restored ~6× faster and folded a 10,000-update batch
~4× faster, because each read and write is one C call into a memory-mapped B-tree, while the RocksDB
binding pays per-key encoding and its LSM tree compacts in the background on the same two cores; a
restarted member re-opens it at once (the memory store re-reads its whole file). LMDB also counts its
entries exactly for free. Its costs: a larger file (no compression) and a map size that
must be reserved up front (grown here when it fills).

A batch is written in transactions of `TXN_ROWS` rows (`upsert` says why), each committed without an
fsync (an fsync per batch of 10,000 random updates cost ~4× the batch itself: each update dirties its
own B-tree page); `persister` syncs before a
checkpoint names the store, so the database never holds less than its checkpoint, and never anything
uncommitted. What survives depends on the stop:

* a clean close syncs and removes the store's *open* marker;
* a process crash (SIGKILL, OOM, a container restart) loses nothing: the kernel still holds every
  committed page and writes it back;
* a machine crash can leave unsynced pages torn. The marker records the boot it was opened under
  (`/proc/sys/kernel/random/boot_id`), so a store found open from another boot — this machine
  rebooted, or the volume moved to another node — is refused, and the task restores in full.

Replaying the changelog from the checkpoint rewrites every key changed since, in order, so whichever
batches after it survived, the result is the committed state.
"""

from __future__ import annotations

import functools
import resource
import shutil
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lmdb
import pyarrow as pa

from streamapp.executor.state import storage
from streamapp.executor.state.stores import items_table, slices

DIRECTORY = "lmdb"
OPEN_MARKER = "open-since-boot"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
# Virtual address space reserved at first; doubled whenever a write finds the map full.
INITIAL_MAP_BYTES = 1 << 30
TXN_ROWS = 5_000
"""Rows per write transaction (`LmdbStore.upsert`): at most this many dirty pages held in memory."""
LOOKUP_THREADS = 8
"""Reads a batch's fold keeps in flight (`LmdbStore.lookup`)."""
LOOKUP_SLICE = 1_000
"""Keys read at a time: by this thread to see whether reads wait for the disk, then by each reader
(enough to pay for the hand-off, few enough to spread a batch)."""

Codec = tuple[Callable[[Any], bytes], Callable[[bytes], Any]]
CODECS: dict[str, Codec] = {
    "long": (lambda v: struct.pack("<q", v), lambda b: struct.unpack("<q", b)[0]),
    "double": (lambda v: struct.pack("<d", v), lambda b: struct.unpack("<d", b)[0]),
    "string": (lambda v: str(v).encode(), lambda b: bytes(b).decode()),
}


@functools.cache
def _readers() -> ThreadPoolExecutor:
    """The readers every store of this process shares (`LmdbStore.lookup`): a member holds many
    partitions, and threads per store would be many idle threads."""
    return ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="lmdb-read")


def _major_faults() -> int:
    """Major page faults of the calling thread so far: reads that waited for the disk."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_majflt


class UncleanStore(RuntimeError):
    """The store was left open by a boot that is over: unsynced pages may be torn."""


def boot_id() -> str:
    return BOOT_ID.read_text().strip() if BOOT_ID.exists() else ""


class LmdbStore:
    """LMDB under `<directory>/lmdb`, values encoded by the pipeline's value type."""

    reads_ahead = True
    """A read may wait for the disk, so a batch's keys are looked up while Spark transforms it."""

    def __init__(self, directory: Path, value_type: str) -> None:
        self.path = directory / DIRECTORY
        self.value_type = value_type
        self.encode, self.decode = CODECS[value_type]
        self.env = self._open()
        self._reader: lmdb.Transaction | None = None
        self.count = self._entries()
        # Held by a read on another thread (`key_source`) and by whatever unmaps the environment (a map
        # resize, `clear`, `close`): LMDB's resize remaps the file under any open read transaction.
        self._remap = threading.Lock()

    def _open(self) -> lmdb.Environment:
        self.path.mkdir(parents=True, exist_ok=True)
        marker = self.path / OPEN_MARKER
        if marker.exists() and marker.read_text() != boot_id():
            raise UncleanStore(f"{self.path} was left open by another boot (a machine crash or another node)")
        storage.write_atomic(marker, boot_id().encode())
        return lmdb.open(
            str(self.path), map_size=INITIAL_MAP_BYTES, subdir=True, lock=True, sync=False, readahead=False
        )

    def __len__(self) -> int:
        """Kept after every write, so a status report from another thread never touches the
        environment (which a restore may be closing and re-creating)."""
        return self.count

    def _entries(self) -> int:
        return int(self.env.stat()["entries"])

    def get(self, key: str) -> Any:
        """One read transaction serves every lookup until the next write: a batch's fold reads
        thousands of keys, and a transaction per key cost more than the reads."""
        if self._reader is None:
            self._reader = self.env.begin()
        found = self._reader.get(key.encode())
        return self.decode(bytes(found)) if found is not None else None

    def lookup(self, keys: Sequence[str]) -> Mapping[str, Any]:
        """The value of every key of `keys` (None when absent): on this thread while the store's pages
        are in memory, else the rest in key order by `LOOKUP_THREADS` readers.

        Why: under a memory limit most of a large store's pages are not in memory, and reading one
        waits for the disk (a major fault). One thread waits for each in turn; several, each in its own
        read transaction, keep that many faults in flight and the disk serves them together (py-lmdb
        leaves the interpreter lock inside LMDB's calls), and key order puts keys that share a page
        one after the other. While the pages are in memory, handing keys to other threads only costs,
        so the first `LOOKUP_SLICE` keys are read here and the rest go to the readers only if those
        made this thread wait for the disk. Measured in `bench/results/memory-limit.md`.
        """
        asked = list(dict.fromkeys(keys))
        faults = _major_faults()
        found = self._read(asked[:LOOKUP_SLICE])
        rest = asked[LOOKUP_SLICE:]
        if not rest or _major_faults() == faults:
            found.update(self._read(rest))
            return found
        rest.sort()
        pieces = [rest[start : start + LOOKUP_SLICE] for start in range(0, len(rest), LOOKUP_SLICE)]
        for piece in _readers().map(self._read, pieces):
            found.update(piece)
        return found

    def _read(self, keys: Sequence[str]) -> dict[str, Any]:
        if not keys:
            return {}
        with self.env.begin() as txn:
            return {
                key: None if (value := txn.get(key.encode())) is None else self.decode(bytes(value))
                for key in keys
            }

    def _end_reads(self) -> None:
        if self._reader is not None:
            self._reader.abort()
            self._reader = None

    def items(self) -> Iterator[tuple[str, Any]]:
        with self.env.begin() as txn:
            for key, value in txn.cursor():
                yield bytes(key).decode(), self.decode(value)

    def upsert(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        """One write transaction per `TXN_ROWS` rows: LMDB holds every page a transaction dirties in
        memory until it commits (and keeps those buffers for reuse), so with random keys a transaction
        of a whole batch costs a page per row — memory that grew with the state until the batch size
        capped it. Splitting a batch is safe: a crash replays the changelog from the checkpoint."""
        self._end_reads()
        for start in range(0, len(keys), TXN_ROWS):
            self._write(keys[start : start + TXN_ROWS], values[start : start + TXN_ROWS])
        self.count = self._entries()

    def _write(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    if not self._appended(txn, keys, values):
                        for key, value in zip(keys, values, strict=True):
                            if value is None:
                                txn.delete(key.encode())
                            else:
                                txn.put(key.encode(), self.encode(value))
                return
            except lmdb.MapFullError:
                with self._remap:
                    self.env.set_mapsize(self.env.info()["map_size"] * 2)

    def _appended(self, txn: lmdb.Transaction, keys: Sequence[str], values: Sequence[Any]) -> bool:
        """Write rows that all sort after the store's last key as appends; False when they do not.

        Why: a restore writes a snapshot's runs, each in key order, into an empty store, and appending
        a slice is one call into LMDB where a put per row is a Python call each (a 50M-key member's
        first commit 37-48 s after its start in `bench/results/memory-limit.md`; 50-70 s in single
        runs before). A row out of order (or a key repeated) is not appended by LMDB; the rows are then
        put in order, which gives the same state.
        """
        if not keys or any(value is None for value in values):
            return False
        cursor = txn.cursor()
        if cursor.last() and bytes(cursor.key()) >= keys[0].encode():
            return False
        rows = [(key.encode(), self.encode(value)) for key, value in zip(keys, values, strict=True)]
        _, added = cursor.putmulti(rows, append=True)
        if added != len(rows):
            for key, value in rows:
                txn.put(key, value)
        return True

    def apply_table(self, table: pa.Table) -> int:
        """One write transaction per slice (`state.slices`): bounds a transaction's dirty pages and lets
        the batch lane run between slices."""
        for chunk in slices(table):
            self.upsert(chunk.column("key").to_pylist(), chunk.column("value").to_pylist())
        return int(table.num_rows)

    def to_table(self, value_type: str) -> pa.Table:
        return items_table(self.items(), value_type)

    def key_source(self) -> Callable[[], Iterator[str]]:
        """Keys read later, in their own read transaction on the calling thread, holding off a resize,
        `clear` or `close` until the iteration ends."""

        def keys() -> Iterator[str]:
            with self._remap, self.env.begin() as txn:
                for key in txn.cursor().iternext(keys=True, values=False):
                    yield bytes(key).decode()

        return keys

    def clear(self) -> None:
        self._end_reads()
        with self._remap:
            self.env.close()
            shutil.rmtree(self.path, ignore_errors=True)
            self.env = self._open()
        self.count = 0

    def persister(self) -> Callable[[], None]:
        """An fsync of what is committed, which is at least the state now: run on another thread, it
        may also cover later batches, and a replay from the checkpoint rewrites those. The caller
        waits for it before `clear` or `close` replaces or closes the environment."""
        env = self.env
        return lambda: env.sync(True)

    def close(self) -> None:
        """Sync, close, and drop the open marker: a clean stop is trusted after any reboot."""
        self._end_reads()
        with self._remap:
            self.env.sync(True)
            self.env.close()
        (self.path / OPEN_MARKER).unlink(missing_ok=True)
