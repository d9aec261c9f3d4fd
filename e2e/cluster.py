"""Command line of the local control plane: ``build``, ``up``, ``down``, ``status``.

``--real-node`` acts on the cluster whose node is a real kubelet on containerd (``e2e/realnode``; its
own directory, ``.cluster-node``) instead of the one with kwok and the process node.

Thin on purpose: everything lives in the ``localcluster`` package so tests and the demo use the same code.
"""

from __future__ import annotations

import argparse
import sys

from localcluster import build
from localcluster.controlplane import LocalCluster, default_root
from realnode import build as node_build


def cluster(args: argparse.Namespace) -> LocalCluster:
    """The cluster the command acts on."""
    return LocalCluster(default_root(args.real_node), with_real_node=args.real_node)


def cmd_build(args: argparse.Namespace) -> int:
    """Build the pinned binaries unless they are cached already."""
    report = build.ensure_built(force=args.force)
    if report is None:
        print(f"k8s binaries cached in {build.bin_dir()}")
    else:
        print(
            f"built {', '.join(build.BINARIES)} into {build.bin_dir()} in {report.seconds:.0f}s "
            f"(largest process: {report.peak_rss_mib:.0f} MiB RSS)"
        )
    if args.real_node:
        seconds = node_build.ensure_built(force=args.force)
        done = "cached" if seconds is None else f"built in {seconds['total']:.0f}s"
        print(f"real-node binaries {done}: {node_build.bin_dir()}, CNI plugins {node_build.cni_dir()}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    """Start the cluster (or find it running) and print how to reach it."""
    target = cluster(args)
    already = target.is_running()
    target.up()
    state = "already running" if already else "up"
    print(f"cluster {state}: export KUBECONFIG={target.kubeconfig}")
    print(f"kubectl: {build.bin_dir() / 'kubectl'}")
    print(f"logs: {target.layout.logs}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Stop every process of the cluster and free its ports."""
    cluster(args).down()
    print("cluster down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Exit 0 when the cluster is running, 1 otherwise."""
    target = cluster(args)
    running = target.is_running()
    print(f"running: KUBECONFIG={target.kubeconfig}" if running else "not running")
    return 0 if running else 1


def parser() -> argparse.ArgumentParser:
    """Sub-commands mirror the Makefile targets k8s-binaries, cluster-up and cluster-down."""
    root = argparse.ArgumentParser(prog="cluster.py", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help="build the control-plane binaries once (cached)")
    build_cmd.add_argument("--force", action="store_true", help="rebuild even when cached")
    build_cmd.set_defaults(func=cmd_build)
    sub.add_parser("up", help="start the local cluster and wait until it is ready").set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop the local cluster, leaving no process behind").set_defaults(
        func=cmd_down
    )
    sub.add_parser("status", help="tell whether the local cluster is running").set_defaults(func=cmd_status)
    for command in sub.choices.values():
        command.add_argument(
            "--real-node", action="store_true", help="the cluster whose node is a kubelet on containerd"
        )
    return root


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``python e2e/cluster.py``."""
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
