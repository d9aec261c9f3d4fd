"""One state store root, one app: the first executor to start claims the root for its app, and an
executor of any other app (another name, or the same name in another namespace) refuses it before it
reads or writes anything, naming the app that owns it. Through `PodSettings.state`, as the executor
starts, on the real filesystem store and the real S3 test server."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_agent_settings import ENV

from streamapp.executor.podsettings import PodSettings
from streamapp.executor.state.blobstore import BlobStore
from streamapp.executor.state.owner import OWNER, RootOwned

STORES = pytest.mark.parametrize("stores", ["file", "s3"])
MANIFEST = "commits/p=0/000000000001.json"


@pytest.fixture
def uri(stores: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh root on the filesystem store or the S3 test server (`stores` names which)."""
    if stores == "file":
        return f"file://{tmp_path / 'state'}"
    return str(request.getfixturevalue("s3_uri"))


def member(uri: str, namespace: str, app: str, member_id: int = 0) -> PodSettings:
    """The settings of one executor of `namespace/app` whose stateStore.uri is `uri`."""
    pipeline = {**json.loads(ENV["STREAMAPP_PIPELINE"]), "stateStore": {"uri": uri}}
    env = {
        **ENV,
        "STREAMAPP_APP": app,
        "STREAMAPP_NAMESPACE": namespace,
        "STREAMAPP_MEMBER_ID": str(member_id),
        "STREAMAPP_PIPELINE": json.dumps(pipeline),
    }
    return PodSettings.from_env(env)


@STORES
@pytest.mark.parametrize(("namespace", "app"), [("ns", "other"), ("elsewhere", "counts")])
def test_a_second_app_on_one_root_is_refused_naming_the_owner(uri: str, namespace: str, app: str) -> None:
    store = member(uri, "ns", "counts").state(check=True)
    store.put(MANIFEST, b"counts' batch 1")
    with pytest.raises(RootOwned, match="belongs to app ns/counts") as refused:
        member(uri, namespace, app).state(check=True)
    assert f"app {namespace}/{app} refuses it" in str(refused.value)
    # The owner's other members, and its restarts, go on using it; its commit is as it wrote it.
    member(uri, "ns", "counts", 1).state(check=True)
    member(uri, "ns", "counts").state(check=True)
    assert store.get(MANIFEST) == b"counts' batch 1"


@STORES
def test_a_root_from_before_the_marker_stays_with_the_app_that_used_it(uri: str) -> None:
    """An app upgraded in place: its root has commits and no marker; its first executor claims it."""
    member(uri, "ns", "counts").state().put(MANIFEST, b"written before the upgrade")
    store = member(uri, "ns", "counts", 2).state(check=True)
    assert json.loads(store.get(OWNER)) == {"namespace": "ns", "app": "counts"}
    assert store.get(MANIFEST) == b"written before the upgrade"
    with pytest.raises(RootOwned):
        member(uri, "ns", "other").state(check=True)


@STORES
def test_of_two_apps_starting_at_once_on_a_fresh_root_exactly_one_gets_it(uri: str) -> None:
    apps = ("left", "right")
    start = threading.Barrier(2 * len(apps))
    outcomes: dict[tuple[str, int], bool] = {}

    def begin(app: str, member_id: int) -> None:
        settings = member(uri, "ns", app, member_id)
        start.wait()
        try:
            settings.state(check=True)
            outcomes[app, member_id] = True
        except RootOwned:
            outcomes[app, member_id] = False

    threads = [threading.Thread(target=begin, args=(app, m)) for app in apps for m in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = {app for (app, _), ran in outcomes.items() if ran}
    assert len(winners) == 1, outcomes
    (winner,) = winners
    assert all(ran == (app == winner) for (app, _), ran in outcomes.items()), outcomes
    store: BlobStore = member(uri, "ns", winner).state()
    assert json.loads(store.get(OWNER))["app"] == winner
