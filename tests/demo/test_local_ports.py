"""Ports for the local cluster's components and the test broker: distinct, and free when handed out."""

from __future__ import annotations

import socket

from localcluster import processes


def test_ports_chosen_together_are_distinct_and_free() -> None:
    ports = processes.free_ports(32)
    assert len(set(ports)) == len(ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
