"""kopf registrations: indices fed by watches, and events that start, wake and stop app loops.

Nothing here decides anything: handlers only route what the watches see to the app's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import kopf

from streamapp.api.names import APP_LABEL, APPS, GROUP, MEMBERS, VERSION
from streamapp.controller.acknowledgement import acked_generation
from streamapp.controller.loops import AppLoops, Key, Sources
from streamapp.controller.observe import controlling_app
from streamapp.controller.relist import Kind, Lister, Relists

ZONE_LABEL = "topology.kubernetes.io/zone"
# The supporting children (controller.supporting): (group/version, plural, kind, index id).
SUPPORTING = (
    ("v1", "services", "Service", "app_services"),
    ("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", "app_budgets"),
    ("v1", "serviceaccounts", "ServiceAccount", "app_accounts"),
    ("rbac.authorization.k8s.io/v1", "roles", "Role", "app_roles"),
    ("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", "app_bindings"),
)


def watch_only_members(settings: kopf.OperatorSettings) -> None:
    """Filter the pod and member watches on the server: only objects carrying the app label are
    streamed to the operator, not every pod of the cluster (kopf's handler `labels=` filters apply
    only after an object arrived)."""
    settings.watching.label_selectors["v1", "pods"] = APP_LABEL
    settings.watching.label_selectors[GROUP, MEMBERS] = APP_LABEL
    for api_version, plural, _, _ in SUPPORTING:
        settings.watching.label_selectors[api_version, plural] = APP_LABEL


class UnusedDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base, not built: this operator has no handler that would read it.

    On every watch event kopf builds the object's "essence" — a deep copy of the body without its
    status — for change handlers (on.create/update/resume/delete) and daemons or timers to compare
    with the last one handled. This operator registers none of those: its handlers are indices and
    event handlers that wake the app's loop, and the loop compares what it needs itself. Yet the copy
    was, with the report parsing, most of what the operator spent per member report (a member's spec
    lists every task it holds; 500 reports a second with 1,000 members). `build` returns an empty
    essence instead; tests/controller/test_watch_costs.py fails if a handler that reads it is ever
    registered.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        del body, extra_fields
        return cast(kopf.BodyEssence, {})


def lighten(settings: kopf.OperatorSettings) -> None:
    """kopf's settings for watches that carry large objects rewritten every few seconds."""
    settings.persistence.diffbase_storage = UnusedDiffBase()


def relists(lister: Lister, loops: AppLoops) -> Relists:
    """Sweeps for what a watch's 410 Gone left indexed though gone (controller.relist), over every
    kind indexed by app; made on the event loop kopf runs on."""
    kinds = (
        Kind("v1", "pods", "member_pods"),
        Kind(f"{GROUP}/{VERSION}", MEMBERS, "app_members"),
        *(Kind(api_version, plural, index_id) for api_version, plural, _, index_id in SUPPORTING),
    )
    return Relists(
        lister,
        kinds,
        Kind(f"{GROUP}/{VERSION}", APPS, ""),
        APP_LABEL,
        wake=lambda body: _wake_owner(loops, str(body["metadata"].get("namespace", "")), body, urgent=True),
        running_apps=lambda: loops.apps,
        stop_app=loops.stop,
        loop=asyncio.get_running_loop(),
    )


def register(
    registry: kopf.OperatorRegistry,
    loops: AppLoops,
    explicit_kubeconfig: bool = False,
    relisted: Relists | None = None,
) -> None:
    """Register every handler on `registry`, routing to `loops`; `relisted` sweeps after a relist.

    Handlers take kopf's keyword arguments as `**kwargs` (kopf passes many; each uses a few).
    Children are indexed by their controlling StreamApp (ownerReference), not by labels alone: a
    foreign pod that copies a member's labels is never taken for a member.
    """

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """kopf's own logins, in the order `cli.load_client_config` gives the writing client: a
        kubeconfig named on the command line (kopf reads `$KUBECONFIG` when called; the client
        library only at import), else the pod's ServiceAccount, else the environment's kubeconfig."""
        if explicit_kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_via_client(**kwargs)

    @kopf.index("v1", "pods", registry=registry, id="member_pods")
    def member_pods(**kwargs: Any) -> dict[Key, Any] | None:
        return _by_owner(kwargs["namespace"], kwargs["body"])

    @kopf.index(GROUP, VERSION, MEMBERS, registry=registry, id="app_members")
    def app_members(**kwargs: Any) -> dict[Key, Any] | None:
        return _by_owner(kwargs["namespace"], kwargs["body"])

    @kopf.index("nodes", registry=registry, id="node_zones")
    def node_zones(**kwargs: Any) -> dict[str, str] | None:
        zone = kwargs["labels"].get(ZONE_LABEL)
        return {kwargs["name"]: zone} if zone else None

    def saw(kind: str, kwargs: Mapping[str, Any]) -> None:
        if relisted is not None:
            relisted.saw(kind, kwargs)

    def present(bodies: Iterable[Any]) -> Iterable[Any]:
        return relisted.present(bodies) if relisted is not None else bodies

    @kopf.on.event("v1", "pods", registry=registry)
    def pod_changed(**kwargs: Any) -> None:
        saw("pods", kwargs)
        # A member pod came, went or changed readiness: liveness, which a failover waits on.
        _wake_owner(loops, kwargs["namespace"], kwargs["body"], urgent=True)

    acknowledged = Acknowledgements()

    @kopf.on.event(GROUP, VERSION, MEMBERS, registry=registry)
    def member_changed(**kwargs: Any) -> None:
        saw(MEMBERS, kwargs)
        urgent = acknowledged.new(kwargs["type"], kwargs["body"])
        _wake_owner(loops, kwargs["namespace"], kwargs["body"], urgent=urgent)

    for api_version, plural, kind, index_id in SUPPORTING:
        _register_supporting(registry, loops, api_version, plural, kind, index_id, saw)

    @kopf.on.event(GROUP, VERSION, APPS, registry=registry)
    async def app_changed(**kwargs: Any) -> None:
        saw(APPS, kwargs)
        key: Key = (kwargs["namespace"], kwargs["name"])
        if kwargs["type"] == "DELETED":
            await loops.stop(key)
            return
        pods: kopf.Index[Key, Any] = kwargs["member_pods"]
        members: kopf.Index[Key, Any] = kwargs["app_members"]
        zones: kopf.Index[str, str] = kwargs["node_zones"]
        owned: list[kopf.Index[Key, Any]] = [kwargs[index_id] for *_, index_id in SUPPORTING]
        sources = Sources(
            pods=lambda k: present(_values(pods, k)),
            members=lambda k: present(_values(members, k)),
            zones=lambda: {node: zone for node, found in zones.items() for zone in found},
            supporting=lambda k: present([body for index in owned for body in _values(index, k)]),
        )
        loops.upsert(key, _plain(kwargs["body"]), sources)


def _register_supporting(
    registry: kopf.OperatorRegistry,
    loops: AppLoops,
    api_version: str,
    plural: str,
    kind: str,
    index_id: str,
    saw: Callable[[str, Mapping[str, Any]], None],
) -> None:
    """Index one kind of supporting child by its app, and wake the app when one changes or goes."""

    @kopf.index(api_version, plural, registry=registry, id=index_id)
    def index(**kwargs: Any) -> dict[Key, Any] | None:
        return _by_owner(kwargs["namespace"], {**kwargs["body"], "kind": kind})

    @kopf.on.event(api_version, plural, registry=registry, id=f"{index_id}_changed")
    def changed(**kwargs: Any) -> None:
        saw(plural, kwargs)
        _wake_owner(loops, kwargs["namespace"], kwargs["body"])


def _by_owner(namespace: str, body: Mapping[str, Any]) -> dict[Key, Any] | None:
    """An index entry under the StreamApp that controls `body`; None for anything else."""
    owner = controlling_app(body)
    return {(namespace, owner.name): _plain(body)} if owner else None


def _wake_owner(loops: AppLoops, namespace: str, body: Mapping[str, Any], urgent: bool = False) -> None:
    owner = controlling_app(body)
    if owner is not None:
        loops.wake((namespace, owner.name), urgent)


class Acknowledgements:
    """The newest generation each StreamAppMember's executor acknowledged (`status.observedGeneration`,
    no higher than its target's: `acknowledgement.acked_generation`),
    by object uid: a member event that raises it carries an acknowledgement, which releases revoked
    tasks that stand still until the next reconcile assigns them on — unlike the progress reports
    around it, it must not wait for the loop's interval."""

    def __init__(self) -> None:
        self.generations: dict[str, int] = {}

    def new(self, event: str, body: Mapping[str, Any]) -> bool:
        """Whether this watch event raises the member's acknowledged generation."""
        uid = str((body.get("metadata") or {}).get("uid", ""))
        if event == "DELETED":
            self.generations.pop(uid, None)
            return False
        generation = acked_generation(body)
        before = self.generations.get(uid)
        self.generations[uid] = generation
        return before is not None and generation > before


def _values(index: kopf.Index[Key, Any], key: Key) -> Iterable[Any]:
    return list(index.get(key, []))


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as a plain dict for the indices and the loops, its nested values shared, not copied.

    Nothing changes them under a reader: kopf never changes a body it delivered (each watch event
    brings a new one; its `Body` is a read-only view) and the operator only reads what it observes,
    building new dicts for what it writes. A deep copy of every member's report (one entry per task
    it holds, 500 reports a second with 1,000 members) cost more than anything else per report."""
    return dict(body)
