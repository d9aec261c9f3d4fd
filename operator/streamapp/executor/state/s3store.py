"""The shared store on an S3-API object store (AWS S3 or a compatible server), as a `BlobStore`.

Mapping of the protocol's needs onto what the S3 API promises, nothing more:

* complete-or-absent: a single `PutObject` is atomic (readers see the old object, or none, or the new
  one whole), so there are no temporary names and nothing a crash can leave half-written.
* create-if-absent: `PutObject` with `If-None-Match: *`. The server answers 412 when the key exists, so
  of several writers racing for one manifest exactly one gets 200 (`tests/executor/state/test_s3_race.py`
  checks this against the test server). A 409 (a conflicting write in flight) is retried.
* reads are `GetObject`/`HeadObject`, listings `ListObjectsV2`; S3 gives strong read-after-write and
  list-after-write consistency for them, which is what the manifest probing and the sweeps assume.
* a blob of any size (a snapshot's runs, `writer`) is streamed: a single `PutObject` when it fits in
  one part, else a multipart upload whose object appears only at `CompleteMultipartUpload`, whole. One
  part is held in memory at a time. An upload that fails is aborted; one a crash interrupts leaves
  invisible parts, which a bucket lifecycle rule (`AbortIncompleteMultipartUpload`) removes.

Connection settings come from the standard AWS environment, so the operator only sets env vars on the
pods: `AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`) for a non-AWS server, `AWS_REGION`, and credentials
either as `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` (from a Secret) or, when none are set, from the
default AWS chain (web identity / pod identity / instance profile).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from streamapp.executor.state.keys import join

_ENDPOINT_VARS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_MISSING = ("404", "NoSuchKey", "NotFound")
_CONFLICT_RETRIES = 5
PROBE_FOLDER = "_streamapp/conditional-write-probes"
PART_BYTES = 32 << 20
"""Bytes per part of a multipart upload (S3 allows 5 MiB to 5 GiB, and 10,000 parts: 320 GiB a blob)."""


class ConditionalWritesIgnored(ValueError):
    """The server stored a second `If-None-Match: *` PUT of an existing key: fencing cannot work on it."""


def parse_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; the prefix has no leading or trailing slash."""
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"{uri!r} is not an s3://bucket/prefix URI")
    return parsed.netloc, parsed.path.strip("/")


MAX_CONNECTIONS = 32
"""Connections an executor's S3 client keeps open (see `client_from_env`)."""


def client_from_env() -> Any:
    """An S3 client configured by the standard AWS environment.

    A custom endpoint (a self-hosted server) gets path-style addressing: such servers are reached by
    IP or a single host name, where virtual-host buckets (`bucket.host`) do not resolve. The pool
    holds `MAX_CONNECTIONS`: boto3's default of 10 is fewer than the history readers
    (`prefetch.READERS`) and the lanes and background threads beside them, and a connection beyond
    it is closed after each request and opened again for the next.
    """
    custom = any(os.environ.get(name) for name in _ENDPOINT_VARS)
    config = Config(
        s3={"addressing_style": "path" if custom else "auto"},
        retries={"mode": "standard", "max_attempts": 5},
        max_pool_connections=MAX_CONNECTIONS,
    )
    return boto3.session.Session().client("s3", config=config)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class MultipartWriter:
    """The stream `S3Store.writer` hands out: bytes are gathered into parts of `part_bytes`, each
    uploaded when full; `finish` publishes the object (one PutObject when it never filled a part)."""

    def __init__(self, client: Any, bucket: str, key: str, part_bytes: int) -> None:
        self.client = client
        self.bucket = bucket
        self.key = key
        self.part_bytes = part_bytes
        self.buffer = bytearray()
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []

    def write(self, data: bytes, /) -> int:
        self.buffer += data
        while len(self.buffer) >= self.part_bytes:
            self._upload_part(bytes(self.buffer[: self.part_bytes]))
            del self.buffer[: self.part_bytes]
        return len(data)

    def _upload_part(self, body: bytes) -> None:
        if self.upload_id is None:
            started = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key)
            self.upload_id = str(started["UploadId"])
        number = len(self.parts) + 1
        done = self.client.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=body
        )
        self.parts.append({"PartNumber": number, "ETag": done["ETag"]})

    def finish(self) -> None:
        if self.upload_id is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self.buffer))
            return
        if self.buffer:
            self._upload_part(bytes(self.buffer))
        self.client.complete_multipart_upload(
            Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": self.parts}
        )

    def abort(self) -> None:
        if self.upload_id is not None:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id)


class S3Store:
    """Blobs under `s3://bucket/prefix/`; names are keys relative to the prefix."""

    def __init__(self, client: Any, bucket: str, prefix: str, part_bytes: int = PART_BYTES) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.part_bytes = part_bytes

    @staticmethod
    def from_uri(uri: str, client: Any = None, part_bytes: int = PART_BYTES) -> S3Store:
        bucket, prefix = parse_uri(uri)
        return S3Store(client if client is not None else client_from_env(), bucket, prefix, part_bytes)

    def __repr__(self) -> str:
        return f"S3Store({self.describe()})"

    def key(self, name: str) -> str:
        return join(self.prefix, name)

    def get(self, name: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self.key(name))
        except ClientError as error:
            if _code(error) in _MISSING:
                raise FileNotFoundError(self.uri(name)) from error
            raise
        return bytes(response["Body"].read())

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data)

    @contextlib.contextmanager
    def writer(self, name: str) -> Iterator[MultipartWriter]:
        upload = MultipartWriter(self.client, self.bucket, self.key(name), self.part_bytes)
        try:
            yield upload
            upload.finish()
        except BaseException:
            with contextlib.suppress(ClientError):  # the first error is the one worth raising
                upload.abort()
            raise

    @contextlib.contextmanager
    def reader(self, name: str) -> Iterator[Any]:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
        except ClientError as error:
            if _code(error) in _MISSING:
                raise FileNotFoundError(self.uri(name)) from error
            raise
        try:
            yield body
        finally:
            body.close()

    def create(self, name: str, data: bytes) -> bool:
        """Conditional PUT. A 412 whose winner holds exactly `data` is this call's own earlier attempt
        (the SDK retried after a lost response), so it counts as created: the protocol's callers write
        data unique to the attempt (owner, epoch, unique file names), so another writer never matches."""
        for _ in range(_CONFLICT_RETRIES):
            try:
                self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data, IfNoneMatch="*")
                return True
            except ClientError as error:
                code = _code(error)
                if code == "ConditionalRequestConflict":
                    continue
                if code != "PreconditionFailed":
                    raise
            try:
                return self.get(name) == data
            except FileNotFoundError:
                continue  # the winner was deleted in between: race again
        raise RuntimeError(f"{self.uri(name)}: conditional create kept conflicting")

    def check_conditional_writes(self) -> None:
        """Refuse a server that ignores `If-None-Match: *`: put a fresh probe key twice, the second must be
        refused (412). On a server that stores both, two owners of a task could both commit the same
        batch and nothing would notice, so the executor stops with this error instead of running unsafely.

        Only a sequential check: a server that honours the header but checks it without a lock passes
        here and loses `tests/executor/state/test_s3_race.py`'s race.
        """
        probe = join(PROBE_FOLDER, uuid.uuid4().hex)
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key(probe), Body=b"1", IfNoneMatch="*")
            try:
                self.client.put_object(Bucket=self.bucket, Key=self.key(probe), Body=b"2", IfNoneMatch="*")
            except ClientError as error:
                if _code(error) == "PreconditionFailed":
                    return
                raise
        finally:
            self.client.delete_object(Bucket=self.bucket, Key=self.key(probe))
        raise ConditionalWritesIgnored(
            f"{self.uri()}: the S3 server ignores conditional writes (a second PutObject with "
            "If-None-Match: * of an existing key succeeded instead of answering 412 Precondition Failed); "
            "StreamApp fences its commits with them, so it refuses to run on this server. Use AWS S3 or a "
            "server that implements conditional writes."
        )

    def exists(self, name: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.key(name))
        except ClientError as error:
            if _code(error) in _MISSING:
                return False
            raise
        return True

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key(name))

    def names(self, folder: str) -> list[str]:
        found: list[str] = []
        for start, page in self._pages(folder):
            found.extend(item["Key"][len(start) :] for item in page.get("Contents", ()))
            found.extend(item["Prefix"][len(start) : -1] for item in page.get("CommonPrefixes", ()))
        return found

    def sizes(self, folder: str) -> dict[str, int]:
        return {
            item["Key"][len(start) :]: int(item["Size"])
            for start, page in self._pages(folder)
            for item in page.get("Contents", ())
        }

    def _pages(self, folder: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The ListObjectsV2 pages of the keys directly under `folder`, each with the listed prefix."""
        base = self.key(folder)
        start = f"{base}/" if base else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=start, Delimiter="/"
        )
        for page in pages:
            yield start, page

    def leftovers(self, folder: str) -> list[tuple[str, str]]:
        return [(name, name) for name in self.names(folder)]  # PUTs are atomic: no temporary names

    def child(self, folder: str) -> S3Store:
        return S3Store(self.client, self.bucket, self.key(folder), self.part_bytes)

    def uri(self, name: str = "") -> str:
        return f"s3://{self.bucket}/{join(self.prefix, name)}"

    def describe(self) -> str:
        return self.uri()
