"""The S3 store's create-if-absent against the real test server: of N writers racing for one key
exactly one wins, losers see the winner's bytes, and the store's other operations behave as the
commit protocol assumes."""

from __future__ import annotations

import threading

import boto3
import pytest
from botocore.config import Config

from streamapp.executor.state import blobstore, s3store

WRITERS = 16
ROUNDS = 20


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
