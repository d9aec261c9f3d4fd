"""Two apps of one namespace never name an object alike: every name the operator gives a child (pods,
StreamAppMembers, ServiceAccounts, Roles, RoleBindings, state claims, the Service, the PDB) and every name
Kubernetes and Spark derive from them (an ephemeral volume's claim `<pod>-<volume>`, a Spark executor pod
`<member pod>-exec-<n>`) belongs to one app, for every pair of specs the models admit.

A name two apps share is one object for both: the second app's member mounts the first one's claim, or
its pod cannot be created. The models refuse the names that would collide (app names ending in
-<number>-exec, ephemeral volume names holding a number followed by '-' or ending in state-<number>), at
apply time through the CRD's CEL and in the operator's own parse.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from api_samples import MINIMAL_APP
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from streamapp.api import StreamApp, ValidationError
from streamapp.controller import children, supporting
from streamapp.executor import sparkk8s

# Name parts chosen to meet each other: digits (member ids), the operator's `state`, Spark's `exec`.
PARTS = st.sampled_from(["b", "x", "state", "exec", "executors", "0", "1", "12"])
# An app name starts with a letter (DNS-1035), so most drawn pairs are admitted and the property is
# checked on them rather than filtered out.
APP_NAMES = st.builds(
    lambda head, rest: "-".join([head, *rest]),
    st.sampled_from(["b", "x", "state", "exec"]),
    st.lists(PARTS, max_size=4),
)
VOLUME_NAMES = st.lists(PARTS, min_size=1, max_size=4).map("-".join)
MEMBERS = st.frozensets(st.integers(0, 13), min_size=1, max_size=4)
SPARK_EXECUTOR_IDS = range(
    1, 14
)  # Spark numbers a driver's executors 1, 2, ... (a replacement gets the next)
Name = tuple[str, str]


def body(name: str, volumes: list[str], spark: bool, shared: bool = False) -> dict[str, Any]:
    """A StreamApp with claimed state, `volumes` as ephemeral volumes, Spark on the cluster or not,
    and (`shared`) one ServiceAccount for all its executors."""
    app = copy.deepcopy(MINIMAL_APP)
    app["metadata"].update(name=name, uid=f"uid-{name}")
    executor = app["spec"]["executor"]
    executor["storage"] = {"size": "1Gi"}
    if spark:
        executor["sparkExecutors"] = {"instances": 2}
    if shared:
        executor["serviceAccountScope"] = "app"
    template = {"spec": {"storageClassName": "x"}, "accessModes": ["ReadWriteOnce"]}
    executor["podTemplate"] = {
        "spec": {"volumes": [{"name": v, "ephemeral": {"volumeClaimTemplate": template}} for v in volumes]}
    }
    return app


def derived(app: StreamApp, members: frozenset[int]) -> set[Name]:
    """(kind, name) of every object the app's `members` make exist in the namespace."""
    made: list[dict[str, Any]] = supporting.wanted(app, members)
    for member in members:
        pod = children.pod(app, member)
        claim = children.state_claim(app, member)
        made += [pod, children.member_object(app, member, {}), *([claim] if claim else [])]
        pod_name = pod["metadata"]["name"]
        made += [
            {"kind": "PersistentVolumeClaim", "metadata": {"name": f"{pod_name}-{volume['name']}"}}
            for volume in pod["spec"]["volumes"]
            if "ephemeral" in volume
        ]
        if app.spec.executor.spark_executors is not None:
            prefix = spark_pod_prefix(app, pod_name)
            made += [{"kind": "Pod", "metadata": {"name": f"{prefix}-exec-{n}"}} for n in SPARK_EXECUTOR_IDS]
    return {(str(o["kind"]), str(o["metadata"]["name"])) for o in made}


def spark_pod_prefix(app: StreamApp, pod_name: str) -> str:
    """The executor pods' name prefix the member's Spark driver is given (`sparkk8s.driver_settings`)."""
    executors = app.spec.executor.spark_executors
    assert executors is not None
    env = {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "STREAMAPP_POD_NAME": pod_name,
        "STREAMAPP_NAMESPACE": "ns",
        "STREAMAPP_HTTP_ADDRESS": "10.1.0.1",
        "STREAMAPP_IMAGE": app.spec.executor.image,
    }
    settings = sparkk8s.driver_settings(executors, app.spec.executor.spark_conf or {}, env, Path("/tmp/t"))
    return settings.conf["spark.kubernetes.executor.podNamePrefix"]


def admitted(name: str, volumes: list[str], spark: bool, shared: bool = False) -> StreamApp | None:
    try:
        return StreamApp.from_resource(body(name, volumes, spark, shared))
    except ValidationError:
        return None


@settings(max_examples=150, deadline=None)
@given(
    first=st.tuples(
        APP_NAMES, st.lists(VOLUME_NAMES, max_size=2, unique=True), st.booleans(), MEMBERS, st.booleans()
    ),
    second=st.tuples(
        APP_NAMES, st.lists(VOLUME_NAMES, max_size=2, unique=True), st.booleans(), MEMBERS, st.booleans()
    ),
)
@example(
    first=("b", ["state-1"], False, frozenset({0}), False), second=("b-0", [], False, frozenset({1}), False)
)
@example(first=("x", [], True, frozenset({0}), False), second=("x-0-exec", [], False, frozenset({3}), False))
@example(
    first=("b", ["1-x"], False, frozenset({0}), False), second=("b-0", ["x"], False, frozenset({1}), False)
)
@example(
    first=("b", [], False, frozenset({0}), True), second=("b-executors", [], False, frozenset({0}), True)
)
def test_two_admitted_apps_of_a_namespace_never_derive_the_same_name(
    first: tuple[str, list[str], bool, frozenset[int], bool],
    second: tuple[str, list[str], bool, frozenset[int], bool],
) -> None:
    assume(first[0] != second[0])
    one = admitted(first[0], first[1], first[2], first[4])
    other = admitted(second[0], second[1], second[2], second[4])
    assume(one is not None and other is not None)
    assert one is not None and other is not None
    shared = derived(one, first[3]) & derived(other, second[3])
    assert not shared, f"{first[0]} and {second[0]} both make {sorted(shared)}"


@pytest.mark.parametrize(
    ("name", "volumes", "path"),
    [
        ("b", ["state-1"], "spec.executor.podTemplate.spec.volumes[0].name"),
        ("b", ["cache", "x-state-12"], "spec.executor.podTemplate.spec.volumes[1].name"),
        ("b", ["1-x"], "spec.executor.podTemplate.spec.volumes[0].name"),
        ("b", ["x-1-y"], "spec.executor.podTemplate.spec.volumes[0].name"),
        ("x-0-exec", [], "metadata.name"),
    ],
)
def test_names_that_would_collide_are_refused_naming_the_field(
    name: str, volumes: list[str], path: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        StreamApp.from_resource(body(name, volumes, False))
    assert raised.value.path == path, str(raised.value)


@pytest.mark.parametrize(("name", "volumes"), [("b", ["cache-1", "state1", "restate-1x"]), ("x-exec", [])])
def test_names_that_cannot_collide_are_kept(name: str, volumes: list[str]) -> None:
    assert admitted(name, volumes, True) is not None


def test_a_volume_that_is_not_ephemeral_keeps_any_name() -> None:
    app = copy.deepcopy(MINIMAL_APP)
    app["spec"]["executor"]["podTemplate"] = {"spec": {"volumes": [{"name": "state-1", "emptyDir": {}}]}}
    assert StreamApp.from_resource(app).spec.executor.pod_template is not None
