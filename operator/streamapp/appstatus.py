"""`streamapp status APP` (also `kubectl streamapp status APP`): an app's live per-task table, from the
API alone.

What `make demo` shows, for any app on any cluster: the app's conditions and counts (its StreamApp
status), the autoscaler's last decision (spec.autoscaling), one line per member (phase, how many tasks
it processes, keeps or warms up) and one row per task: its owner and epoch, what the owner last reported (applied offset, input lag) and every other copy
with its role and lag (the StreamAppMember statuses the executors write). Both objects are parsed with
the same models the operator and the executors write them with. It needs only `get` on streamapps and
`list` on streamappmembers in the app's namespace. `--watch` redraws it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from streamapp.api.member import StreamAppMember, TaskReport
from streamapp.api.names import APP_LABEL, APPS, GROUP, MEMBERS, VERSION
from streamapp.api.streamapp import StreamApp
from streamapp.terminal import BOLD, DIM, RESET, Screen

ROLE_ORDER = ("active", "revoking", "warmup", "standby")


@dataclass(frozen=True)
class Observed:
    """The app and its members as read at one instant."""

    app: StreamApp
    members: tuple[StreamAppMember, ...]


def fetch(api: Any, namespace: str, name: str) -> Observed:
    """Read the StreamApp and its StreamAppMembers (I/O)."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api)
    body = cast(dict[str, Any], custom.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, name))
    found = cast(
        dict[str, Any],
        custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, MEMBERS, label_selector=f"{APP_LABEL}={name}"
        ),
    )
    app = StreamApp.from_resource(body)
    members = tuple(StreamAppMember.from_resource(item) for item in found.get("items", []))
    return Observed(app, tuple(sorted(members, key=lambda m: m.spec.member_id)))


def render(observed: Observed, color: bool = False) -> list[str]:
    """The table as lines; pure."""
    bold, dim, reset = (BOLD, DIM, RESET) if color else ("", "", "")
    app, status = observed.app, observed.app.status
    lines = [f"{bold}{app.metadata.namespace}/{app.metadata.name}{reset}  {_summary(observed)}"]
    lines += [f"  {c.type}: {c.status} {c.reason}: {c.message}" for c in status.conditions]
    lines += _autoscaling_lines(observed)
    lines += ["", *_member_lines(observed), ""]
    lines.append(
        f"{bold}{'task':>4}  {'owner':<5}  {'epoch':>5}  {'applied':>11}  {'input lag':>9}  other copies{reset}"
    )
    reports = _reports(observed.members)
    owners = {a.task: (m.spec.member_id, a.epoch) for m in observed.members for a in m.spec.active}
    for task in range(app.spec.partitions):
        owner = owners.get(task)
        mine = reports.get((owner[0], task)) if owner is not None else None
        applied = f"{mine.applied_offset:,}" if mine is not None and mine.applied_offset is not None else "-"
        lag = f"{mine.input_lag:,}" if mine is not None and mine.input_lag is not None else "-"
        others = _copies(task, owner[0] if owner else None, reports)
        lines.append(
            f"{task:>4}  {f'm{owner[0]}' if owner else '-':<5}  {owner[1] if owner else '-':>5}  "
            f"{applied:>11}  {lag:>9}  {others or dim + '-' + reset}"
        )
    return lines


def _summary(observed: Observed) -> str:
    status, spec = observed.app.status, observed.app.spec
    counts = status.tasks
    parts = [
        f"replicas {status.ready_replicas or 0}/{spec.replicas} ready",
        f"{spec.partitions} tasks",
        f"generation {status.generation or 0}",
    ]
    if counts is not None:
        parts.append(
            f"{counts.active} active, {counts.warming} warming, {counts.reserved} reserved, "
            f"{counts.revoking} revoking, {counts.unassigned} unassigned"
        )
    if status.input_lag is not None:
        parts.append(f"input lag {status.input_lag:,}")
    return " · ".join(parts)


def _autoscaling_lines(observed: Observed) -> list[str]:
    """The autoscaler's last decision (spec.autoscaling): what it wants, why, what it waits for."""
    shown = observed.app.status.autoscaling
    if shown is None:
        return []
    needed = f", {shown.needed_replicas} needed" if shown.needed_replicas is not None else ""
    lines = [f"  Autoscaling: {shown.action} · {shown.replicas} members wanted{needed}: {shown.reason}"]
    if shown.waiting_for:
        lines.append(f"    waiting for {shown.waiting_for}")
    return lines


def _member_lines(observed: Observed) -> list[str]:
    summaries = {s.id: s for s in observed.app.status.members}
    lines = []
    for member in observed.members:
        spec, summary = member.spec, summaries.get(member.spec.member_id)
        phase = summary.phase if summary is not None else "?"
        lines.append(
            f"m{spec.member_id}  {phase:<10} {len(spec.active)} active, {len(spec.standby)} standby, "
            f"{len(spec.warmup)} warmup"
            + (f"  ({summary.lost_tasks.reason})" if summary and summary.lost_tasks else "")
        )
    return lines or ["no members yet"]


def _reports(members: Sequence[StreamAppMember]) -> dict[tuple[int, int], TaskReport]:
    return {(m.spec.member_id, r.task): r for m in members for r in m.status.tasks}


def _copies(task: int, owner: int | None, reports: dict[tuple[int, int], TaskReport]) -> str:
    found = [
        (ROLE_ORDER.index(r.role) if r.role in ROLE_ORDER else len(ROLE_ORDER), member, r)
        for (member, reported), r in reports.items()
        if reported == task and not (member == owner and r.role == "active")
    ]
    return ", ".join(
        f"m{member} {r.role}" + (f" lag {r.lag:,}" if r.lag is not None else "")
        for _, member, r in sorted(found)
    )


def register(subparsers: Any) -> None:
    """Add the `status` subcommand."""
    parser = subparsers.add_parser(
        "status", help="an app's live per-task table, from the API (kubectl streamapp status)"
    )
    parser.add_argument("app", help="the StreamApp's name")
    parser.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("-w", "--watch", action="store_true", help="redraw every --interval seconds until ^C")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between redraws (default 2)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the table once, or redraw it until interrupted; exit 1 with the API's reason on failure."""
    from kubernetes import config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    try:
        api = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
        namespace = args.namespace or _context_namespace(args.kubeconfig, args.context)
    except (ConfigException, OSError) as error:
        print(f"streamapp status: no usable kubeconfig: {error}")
        return 1
    screen = Screen()
    try:
        while True:
            try:
                lines = render(fetch(api, namespace, args.app), color=screen.tty)
            except ApiException as error:
                print(f"streamapp status: {namespace}/{args.app}: {error.status} {error.reason}")
                return 1
            if not args.watch:
                print("\n".join(lines))
                return 0
            screen.draw(lines)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def _context_namespace(kubeconfig: str | None, context: str | None) -> str:
    from kubernetes import config

    contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    chosen = next((c for c in contexts if c["name"] == context), active)
    return str((chosen.get("context") or {}).get("namespace") or "default")


def kubectl_plugin() -> int:
    """`kubectl-streamapp`: kubectl runs it as `kubectl streamapp status APP`."""
    import sys

    from streamapp.cli import main

    return main(sys.argv[1:])
