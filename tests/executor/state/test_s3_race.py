"""The S3 store's create-if-absent against the real test server: of N writers racing for one key
exactly one wins, losers see the winner's bytes, and the store's other operations behave as the
commit protocol assumes."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from streamapp.executor.state import blobstore, s3store

WRITERS = 16
# SeaweedFS serializes conditional PUTs of one key: each loser is answered 412 after up to a second per
# writer ahead of it, so a round of 16 takes 3-10 s; six rounds still race every writer every time.
ROUNDS = 6


def test_exactly_one_of_many_racing_writers_creates_each_key(s3_uri: str) -> None:
    # One connection per writer, so all of them are in flight at once (the SDK's default pool is 10).
    client = boto3.session.Session().client(
        "s3", config=Config(max_pool_connections=WRITERS, s3={"addressing_style": "path"})
    )
    store = s3store.S3Store.from_uri(s3_uri, client=client)
    for round_ in range(ROUNDS):
        key = f"commits/p=0/{round_:012d}.json"
        start = threading.Barrier(WRITERS)
        won: list[int] = []

        def race(index: int, key: str = key, start: threading.Barrier = start, won: list[int] = won) -> None:
            start.wait()
            if store.create(key, f"writer {index}".encode()):
                won.append(index)

        threads = [threading.Thread(target=race, args=(i,)) for i in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1, f"round {round_}: winners {won}"
        assert store.get(key) == f"writer {won[0]}".encode()


def test_reads_listings_deletes_and_sweeps_follow_the_protocol(s3_uri: str) -> None:
    store = s3store.S3Store.from_uri(s3_uri)
    with pytest.raises(FileNotFoundError):
        store.get("commits/p=0/000000000000.json")
    assert not store.exists("commits/p=0/000000000000.json")
    assert store.create("commits/p=0/000000000000.json", b"a")
    assert store.create("commits/p=0/000000000000.json", b"a"), "a retried create of the same bytes"
    assert not store.create("commits/p=0/000000000000.json", b"b")
    store.put("changelog/p=0/000000000001-e1-kept.parquet", b"x")
    store.put("changelog/p=0/000000000001-e1-lost.parquet", b"y")
    store.put("changelog/p=0/000000000002-e1-open.parquet", b"z")
    assert sorted(store.names("commits")) == ["p=0"]
    decided = {"000000000001-": {"000000000001-e1-kept.parquet"}}
    assert blobstore.remove_unnamed(store, "changelog/p=0", decided) == 1
    assert sorted(store.names("changelog/p=0")) == [
        "000000000001-e1-kept.parquet",
        "000000000002-e1-open.parquet",
    ]
    store.delete("changelog/p=0/000000000002-e1-open.parquet")
    store.delete("changelog/p=0/000000000002-e1-open.parquet")
    assert store.child("changelog").names("p=0") == ["000000000001-e1-kept.parquet"]


def _ignoring_conditional_writes(client: Any) -> Any:
    """The same server seen through a client that drops `If-None-Match`: to the store, exactly a server
    that ignores the header (it stores every PUT)."""

    def drop(params: dict[str, Any], **_: Any) -> None:
        params.pop("IfNoneMatch", None)

    client.meta.events.register("before-parameter-build.s3.PutObject", drop)
    return client


def test_an_executor_opening_the_store_checks_the_server_honours_conditional_writes(s3_uri: str) -> None:
    store = blobstore.open_uri(s3_uri, check=True)
    assert isinstance(store, s3store.S3Store)
    assert store.names(s3store.PROBE_FOLDER) == [], "the probe is deleted"


def test_a_server_that_ignores_conditional_writes_is_refused_with_a_clear_error(s3_uri: str) -> None:
    store = s3store.S3Store.from_uri(s3_uri, client=_ignoring_conditional_writes(s3store.client_from_env()))
    with pytest.raises(s3store.ConditionalWritesIgnored, match="ignores conditional writes"):
        store.check_conditional_writes()
    assert store.names(s3store.PROBE_FOLDER) == [], "the probe is deleted"
    # What the check protects against: on such a server both racing owners "win" the same manifest.
    assert store.create("commits/p=0/000000000000.json", b"owner a")
    assert store.create("commits/p=0/000000000000.json", b"owner b")


def test_large_blobs_stream_in_parts_and_appear_only_whole(s3_uri: str) -> None:
    store = s3store.S3Store.from_uri(s3_uri, part_bytes=5 << 20)  # S3's smallest part
    blob = bytes(range(256)) * (48 * 1024)  # 12 MiB: three parts
    with store.writer("runs/p=0/big.arrows") as stream:
        for start in range(0, len(blob), 1 << 20):
            stream.write(blob[start : start + (1 << 20)])
            assert not store.exists("runs/p=0/big.arrows"), "nothing is visible before the end"
        assert len(stream.parts) == 2, "full parts are uploaded as they fill"
    with store.reader("runs/p=0/big.arrows") as stream:
        assert stream.read() == blob
    with pytest.raises(RuntimeError, match="writer died"), store.writer("runs/p=0/torn.arrows") as stream:
        stream.write(blob)
        raise RuntimeError("writer died")
    assert not store.exists("runs/p=0/torn.arrows"), "a failed upload publishes nothing"
    uploads = store.client.list_multipart_uploads(Bucket=store.bucket).get("Uploads", [])
    assert [u for u in uploads if u["Key"].endswith("torn.arrows")] == [], "and is aborted"
    with pytest.raises(FileNotFoundError), store.reader("runs/p=0/none.arrows"):
        pass


@pytest.mark.long
def test_a_blob_over_a_gibibyte_streams_through_in_bounded_memory(s3_uri: str) -> None:
    """A snapshot run of a large state is one blob: 1.1 GiB goes up in `PART_BYTES` parts and comes
    back byte for byte, while the process holds about one part at a time, not the blob."""
    store = s3store.S3Store.from_uri(s3_uri)
    chunk, chunks = 1 << 20, 1_100  # 1.1 GiB
    written, read = hashlib.sha256(), hashlib.sha256()
    with ResidentPeak() as peak:
        with store.writer("runs/p=0/huge.arrows") as stream:
            for _ in range(chunks):
                data = os.urandom(chunk)
                written.update(data)
                stream.write(data)
            parts = len(stream.parts)
        with store.reader("runs/p=0/huge.arrows") as stream:
            size = 0
            while data := stream.read(chunk):
                read.update(data)
                size += len(data)
    assert parts == chunk * chunks // s3store.PART_BYTES
    assert size == chunk * chunks and read.hexdigest() == written.hexdigest()
    assert peak.growth < 4 * s3store.PART_BYTES, f"resident memory grew by {peak.growth >> 20} MiB"


class ResidentPeak:
    """The most this process's resident set grew above where it stood on entry, sampled every 20 ms
    on a thread of its own."""

    def __init__(self) -> None:
        self.growth = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    @staticmethod
    def _resident() -> int:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")

    def _sample(self) -> None:
        base = self._resident()
        while not self._stop.wait(0.02):
            self.growth = max(self.growth, self._resident() - base)

    def __enter__(self) -> ResidentPeak:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join()
