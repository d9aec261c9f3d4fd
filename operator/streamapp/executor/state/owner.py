"""Whose a state store root is: one app's, named by a marker at the root.

Everything under a root (commit manifests, changelog, snapshots, marks, staged outputs) is named by
partition and sequence only, so two apps given the same `spec.pipeline.stateStore.uri` would race for
the same manifests and each take the other's commits for its own: exactly-once and both apps' state
would be gone. So the first executor to start on a root claims it with `owner.json`, which names the
app's namespace and name, created if absent (`BlobStore.create`: a hard link on a file store, a
PutObject with `If-None-Match: *` on S3, whose support the executor checks before). Every executor
checks it as it starts, before its first read or write of the root, and an executor of any other app
stops with `RootOwned`, which reaches the app's Degraded condition as the member's setup error.

- A root from before the marker (an app upgraded in place) has none: the first app to start on it
  claims it and keeps its state. Had two apps already shared it, one of them learns it now.
- Two apps starting at once on a fresh root: exactly one create wins (on both stores), so one app
  runs and the other is refused before it wrote anything.
- An app deleted and created again under the same namespace and name finds its state: the marker names
  no UID. Whoever may create that app could have edited the old one, and a state store, like a
  StatefulSet's claims, outlives the object that used it (GitOps tools delete and re-create on some
  changes).
- What the marker does not stop: code that writes the root directly (a pipeline's own code, another
  image) with the same credentials. It protects apps from a spec naming another app's root; separate
  roots need separate credentials (a bucket policy per prefix) where tenants do not trust each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from streamapp.executor.state.blobstore import BlobStore
from streamapp.executor.state.keys import join

OWNER = "owner.json"
_ATTEMPTS = 3


class RootOwned(ValueError):
    """The root belongs to another app (or its marker is unreadable): this app must not use it."""


@dataclass(frozen=True)
class Owner:
    """The app a root belongs to."""

    namespace: str
    app: str

    def encode(self) -> bytes:
        """The same bytes from every member of the app (a retried or concurrent create then matches)."""
        return json.dumps({"namespace": self.namespace, "app": self.app}, sort_keys=True).encode()

    @staticmethod
    def decode(data: bytes) -> Owner:
        body = json.loads(data)
        return Owner(namespace=str(body["namespace"]), app=str(body["app"]))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.app}"


def claim(store: BlobStore, namespace: str, app: str) -> None:
    """Make sure the root is this app's: claim it when unclaimed, else raise `RootOwned` unless the
    marker names this app."""
    mine = Owner(namespace, app)
    marker = join(store.describe(), OWNER)
    for _ in range(_ATTEMPTS):
        if store.create(OWNER, mine.encode()):
            return
        try:
            found = Owner.decode(store.get(OWNER))
        except FileNotFoundError:
            continue  # removed since our create lost: claim it again
        except (ValueError, KeyError, TypeError) as error:
            raise RootOwned(
                f"state store {store.describe()}: its owner marker {marker} is unreadable ({error}); "
                f"app {mine} will not use a root it cannot tell is its own"
            ) from None
        if found == mine:
            return
        raise RootOwned(
            f"state store {store.describe()} belongs to app {found} (its marker {marker} says so): "
            f"two apps on one spec.pipeline.stateStore.uri overwrite each other's commits, so app {mine} "
            "refuses it. Give this app a stateStore.uri of its own (or, if that app is gone for good and "
            "this one is to take its state over, delete the marker)"
        )
    raise RootOwned(f"state store {store.describe()}: its owner marker {marker} kept disappearing")
