"""Apply-time check that a StreamApp references only what its author may read (a ValidatingAdmissionPolicy).

The operator creates member pods with its own rights, and a pod hands whatever it references to the
code it runs: a mounted Secret, an env var from `secretKeyRef`, a ConfigMap, a claim's data, a pull
secret. So someone who may create StreamApps but not read Secrets could read any Secret of the
namespace through their app's pods (a confused deputy). Only the API server knows who asks: this
policy checks, with CEL's `authorizer`, that the requesting user may `get` every Secret, ConfigMap,
PersistentVolumeClaim and DRA ResourceClaim the app names — in `spec.pipeline` (the S3 store's and
Kafka's credentials) and anywhere in `spec.executor.podTemplate` (volumes, projected sources,
volume-plugin secret refs, env and envFrom of every container list, imagePullSecrets, resourceClaims)
— and refuses the app with a message naming the field, the kind and the name.

It is a policy of its own, apart from the pod-template one (`render.admissionpolicy`): that one is left
out on installs that run privileged executors, while reading what one may not read is never an install's
choice. It runs on CREATE and on every UPDATE that changes `spec`, for every reference (not only new
ones): whoever changes the spec changes what the pods run (image, command, sidecars) and so who reads
what they are given. Metadata-only writes (labels, finalizers, the garbage collector) and the /scale
and /status subresources are not checked.

Authorship is known only at admission: the operator, which reconciles later, cannot tell who wrote an
app, so its own re-check (`controller.claims`) covers what it can judge without that — claims that
belong to other apps. Under GitOps the requesting user is the GitOps controller's account: grant it
only what its tenants may read, or give each tenant its own.

A field set to null is absent here as in the operator (`api.podtemplate` drops nulls when it parses
the template): `present()` is `has()` and not null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamapp.render import admissionpolicy

NAME = "streamapp-references"
TEMPLATE = "spec.executor.podTemplate.spec"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Volume plugins whose secret the kubelet reads in the pod's namespace (refused by the pod-template
# policy, but allowed on privileged installs, where this policy stays).
PLUGIN_SECRET_REFS = (
    ("csi", "nodePublishSecretRef"),
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("rbd", "secretRef"),
    ("flexVolume", "secretRef"),
    ("iscsi", "secretRef"),
    ("scaleIO", "secretRef"),
    ("storageos", "secretRef"),
)


@dataclass(frozen=True)
class Kind:
    """A kind of object an app may reference, as the authorizer names it."""

    name: str
    group: str
    resource: str


SECRET = Kind("Secret", "", "secrets")
CONFIG_MAP = Kind("ConfigMap", "", "configmaps")
CLAIM = Kind("PersistentVolumeClaim", "", "persistentvolumeclaims")
RESOURCE_CLAIM = Kind("ResourceClaim", "resource.k8s.io", "resourceclaims")


def present(path: str) -> str:
    """CEL: the field at `path` is set and not null."""
    return f"(has({path}) && {path} != null)"


def _list(path: str) -> str:
    """CEL: the list at `path`, or [] when it is absent or null."""
    return f"({present(path)} ? {path} : [])"


def _names(items: str, var: str, *fields: str) -> str:
    """CEL: the names at `var.fields...` of every item of the list `items` that has one set."""
    chain = [f"{var}.{'.'.join(fields[: i + 1])}" for i in range(len(fields))]
    return f"{items}.filter({var}, {' && '.join(present(p) for p in chain)}).map({var}, {chain[-1]})"


def _scalar(*fields: str) -> str:
    """CEL: a one-name list of the optional field `object.fields...`, or []."""
    chain = [f"object.{'.'.join(fields[: i + 1])}" for i in range(len(fields))]
    return f"({' && '.join(present(p) for p in chain[1:])} ? [{chain[-1]}] : [])"


VOLUMES = "variables.volumes"
CONTAINERS = "variables.containers"


def references() -> list[tuple[str, Kind, str]]:
    """(field named in the message, kind, CEL list of lists of names) for every place an app names an
    object its pods get. Lists of lists, because CEL has no flatten: one inner list per container or
    volume."""
    out: list[tuple[str, Kind, str]] = [
        (
            "spec.pipeline.stateStore.credentialsSecret",
            SECRET,
            f"[{_scalar('spec', 'pipeline', 'stateStore', 'credentialsSecret')}]",
        ),
    ]
    for role in ("source", "sink"):
        names = _scalar("spec", "pipeline", role, "kafka", "credentials", "secretName")
        out.append((f"spec.pipeline.{role}.kafka.credentials.secretName", SECRET, f"[{names}]"))
    volume = f"{TEMPLATE}.volumes[]"
    out += [
        (f"{volume}.secret.secretName", SECRET, f"[{_names(VOLUMES, 'v', 'secret', 'secretName')}]"),
        (f"{volume}.azureFile.secretName", SECRET, f"[{_names(VOLUMES, 'v', 'azureFile', 'secretName')}]"),
        *(
            (f"{volume}.{plugin}.{ref}.name", SECRET, f"[{_names(VOLUMES, 'v', plugin, ref, 'name')}]")
            for plugin, ref in PLUGIN_SECRET_REFS
        ),
        (f"{volume}.configMap.name", CONFIG_MAP, f"[{_names(VOLUMES, 'v', 'configMap', 'name')}]"),
        (
            f"{volume}.persistentVolumeClaim.claimName",
            CLAIM,
            f"[{_names(VOLUMES, 'v', 'persistentVolumeClaim', 'claimName')}]",
        ),
    ]
    for source, kind in (("secret", SECRET), ("configMap", CONFIG_MAP)):
        sources = f"({present('v.projected')} ? {_list('v.projected.sources')} : [])"
        out.append(
            (
                f"{volume}.projected.sources[].{source}.name",
                kind,
                f"{VOLUMES}.map(v, {_names(sources, 's', source, 'name')})",
            )
        )
    container = f"{TEMPLATE}.<containers|initContainers|ephemeralContainers>[]"
    env, env_from = _list("c.env"), _list("c.envFrom")
    out += [
        (
            f"{container}.env[].valueFrom.secretKeyRef.name",
            SECRET,
            f"{CONTAINERS}.map(c, {_names(env, 'e', 'valueFrom', 'secretKeyRef', 'name')})",
        ),
        (
            f"{container}.env[].valueFrom.configMapKeyRef.name",
            CONFIG_MAP,
            f"{CONTAINERS}.map(c, {_names(env, 'e', 'valueFrom', 'configMapKeyRef', 'name')})",
        ),
        (
            f"{container}.envFrom[].secretRef.name",
            SECRET,
            f"{CONTAINERS}.map(c, {_names(env_from, 'e', 'secretRef', 'name')})",
        ),
        (
            f"{container}.envFrom[].configMapRef.name",
            CONFIG_MAP,
            f"{CONTAINERS}.map(c, {_names(env_from, 'e', 'configMapRef', 'name')})",
        ),
        (
            f"{TEMPLATE}.imagePullSecrets[].name",
            SECRET,
            f"[{_names(_list('variables.template.imagePullSecrets'), 'p', 'name')}]",
        ),
        (
            f"{TEMPLATE}.resourceClaims[].resourceClaimName",
            RESOURCE_CLAIM,
            f"[{_names(_list('variables.template.resourceClaims'), 'r', 'resourceClaimName')}]",
        ),
    ]
    return out


def _allowed(kind: Kind, name: str) -> str:
    """CEL: the requesting user may get the object `name` of `kind` in the request's namespace."""
    return (
        f"authorizer.group('{kind.group}').resource('{kind.resource}').namespace(request.namespace)"
        f".name({name}).check('get').allowed()"
    )


def denied() -> list[dict[str, str]]:
    """One variable per reference: the names (in lists, one per container or volume that has any) its
    requesting user may not get."""
    return [
        {
            "name": f"denied{index}",
            "expression": f"{names}.map(l, l.filter(n, !{_allowed(kind, 'n')})).filter(l, size(l) > 0)",
        }
        for index, (_, kind, names) in enumerate(references())
    ]


def validations() -> list[dict[str, str]]:
    """One validation per reference: nothing denied, else a message naming the field, the kind and
    the names there (a messageExpression cannot call the authorizer, so it names all of them)."""
    out = []
    for index, (field, kind, names) in enumerate(references()):
        why = (
            f"you may not get it (each object named needs get on {kind.resource}), and the operator "
            "would hand it to the pods of the app"
        )
        joined = f"{names}.map(l, l.join(', ')).filter(s, s != '').join(', ')"
        out.append(
            {
                "expression": f"size(variables.denied{index}) == 0",
                "messageExpression": (
                    f"'{field} names {kind.name} ' + {joined} + ' in namespace ' + request.namespace + ': {why}'"
                ),
                "message": f"{field} names a {kind.name}: {why}",
                "reason": "Forbidden",
            }
        )
    return out


def policy(name: str = NAME) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy over the objects StreamApps reference."""
    template = f"({present('object.spec.executor.podTemplate')} ? object.spec.executor.podTemplate : {{}})"
    spec = f"({present(f'{template}.spec')} ? {template}.spec : {{}})"
    return admissionpolicy.app_policy(
        name,
        matchConditions=[
            {"name": "spec-written", "expression": "oldObject == null || object.spec != oldObject.spec"}
        ],
        variables=[
            {"name": "template", "expression": spec},
            {"name": "volumes", "expression": _list("variables.template.volumes")},
            {
                "name": "containers",
                "expression": " + ".join(_list(f"variables.template.{key}") for key in CONTAINER_LISTS),
            },
            *denied(),
        ],
        validations=validations(),
    )
