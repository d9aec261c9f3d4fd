"""``python -m processnode``: run the process-node agent (started by ``e2e/cluster.py up``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from processnode import logserver
from processnode.agent import Agent
from processnode.container import Runtime
from processnode.kube import NodeClient
from processnode.node import PROCESS_NODE_LABELS, PROCESS_NODE_TAINT, NodeSpec


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="processnode", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="kubeconfig of system:node:<name>")
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--zone", default="", help="topology.kubernetes.io/zone label")
    parser.add_argument("--state-dir", type=Path, required=True, help="pod work dirs, logs and pid records")
    parser.add_argument(
        "--path-prepend", default="", help=f"directories ({os.pathsep}-separated) put first on pods' PATH"
    )
    parser.add_argument("--restart-backoff", type=float, default=1.0, help="first restart delay (s)")
    parser.add_argument("--max-restart-backoff", type=float, default=60.0, help="restart delay cap (s)")
    parser.add_argument("--kubelet-port", type=int, default=0, help="HTTPS port for kubectl logs (0: off)")
    parser.add_argument("--serving-cert", type=Path, help="the log server's certificate (for 127.0.0.1)")
    parser.add_argument("--serving-key", type=Path, help="the log server's private key")
    parser.add_argument("--client-ca", type=Path, help="CA of kube-apiserver's kubelet client certificate")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    runtime = Runtime(
        state_dir=args.state_dir,
        path_prepend=tuple(p for p in args.path_prepend.split(os.pathsep) if p),
        backoff_s=args.restart_backoff,
        max_backoff_s=args.max_restart_backoff,
    )
    spec = NodeSpec(
        name=args.node_name,
        zone=args.zone,
        labels=PROCESS_NODE_LABELS,
        taints=[PROCESS_NODE_TAINT],
        kubelet_port=args.kubelet_port,
    )
    log_tls = None
    if args.kubelet_port:
        log_tls = logserver.TlsFiles(args.serving_cert, args.serving_key, args.client_ca)
    Agent(NodeClient(args.kubeconfig), spec, runtime, log_tls).run()


if __name__ == "__main__":
    main()
