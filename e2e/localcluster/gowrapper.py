"""Wrapper Go modules that make upstream commands buildable with plain ``go build``.

``go install k8s.io/kubernetes/cmd/...@vX`` fails because Kubernetes' own go.mod replaces its staging
modules with local paths (``k8s.io/api => ./staging/src/k8s.io/api``), and replaces are ignored outside
the main module. A wrapper module that requires the upstream module and re-points each staging module at
its published tag is the main module, so its replaces apply. etcd's server module has the same problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.\-/]+)\s+=>\s+\./staging/", re.MULTILINE)
_GO_DIRECTIVE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)
_GODEBUG_DIRECTIVE = re.compile(r"^godebug\s+(.+)$", re.MULTILINE)
# `replace a => b vX` (a module, not a ./path), alone or inside a `replace (...)` block; `//` comments skipped
_MODULE_REPLACE = re.compile(r"^(?:replace\s+)?\s*([\w.\-/]+(?:\s+v\S+)?)\s+=>\s+([\w.\-/]+)\s+(v\S+)\s*$")


def staging_modules(upstream_go_mod: str) -> list[str]:
    """Module paths that the upstream go.mod replaces with a local ``./staging`` directory."""
    return sorted(set(_STAGING_REPLACE.findall(upstream_go_mod)))


def go_directive(upstream_go_mod: str) -> str:
    """The upstream ``go`` line, reused so the wrapper compiles with the same language version."""
    match = _GO_DIRECTIVE.search(upstream_go_mod)
    if match is None:
        raise ValueError("upstream go.mod has no go directive")
    return match.group(1)


def godebug_directives(upstream_go_mod: str) -> list[str]:
    """Upstream ``godebug`` settings: only the main module's apply, so the wrapper must repeat them."""
    return [m.strip() for m in _GODEBUG_DIRECTIVE.findall(upstream_go_mod)]


def module_replaces(upstream_go_mod: str) -> dict[str, str]:
    """Upstream replaces of a module by another published module (``a => b vX``), which the wrapper must
    repeat: SeaweedFS replaces a module deleted from GitHub with a maintained fork. Local-path replaces
    are left out (nothing to point them at but a published version: see :func:`kubernetes_replaces`)."""
    found: dict[str, str] = {}
    in_block = False
    for raw in upstream_go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("replace ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        if not (in_block or line.startswith("replace ")):
            continue
        match = _MODULE_REPLACE.match(line)
        if match is not None and not match.group(2).startswith("."):
            found[match.group(1)] = f"{match.group(2)} {match.group(3)}"
    return found


def render(
    *,
    module: str,
    go: str,
    requires: dict[str, str],
    tools: Iterable[str],
    replaces: dict[str, str] | None = None,
    godebug: Iterable[str] = (),
) -> str:
    """Text of a wrapper go.mod; ``replaces`` maps a module path to ``path version``."""
    lines = [f"module {module}", "", f"go {go}", ""]
    lines += [f"godebug {setting}" for setting in godebug]
    lines += ["", "require ("]
    lines += [f"\t{path} {version}" for path, version in sorted(requires.items())]
    lines += [")", ""]
    if replaces:
        lines += ["replace ("]
        lines += [f"\t{path} => {target}" for path, target in sorted(replaces.items())]
        lines += [")", ""]
    lines += [f"tool {tool}" for tool in sorted(tools)]
    return "\n".join(lines) + "\n"


def kubernetes_replaces(upstream_go_mod: str, staging_tag: str) -> dict[str, str]:
    """Replace every staging module with its published tag (``v0.Y.Z`` for Kubernetes ``v1.Y.Z``)."""
    return {module: f"{module} {staging_tag}" for module in staging_modules(upstream_go_mod)}
