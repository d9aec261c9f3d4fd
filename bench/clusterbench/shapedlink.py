"""The shared store behind a slow link: each app's S3 server in a network namespace of its own, its
replies to the executors held to a rate by `tc`.

Why: in a cluster a cold restore is bounded by the network between the member and the object store (a
node's NIC, a bucket's throughput), not by the CPU; over loopback a restore of millions of keys takes
seconds, so the engine's choice between waiting for a member and restoring elsewhere would never be
tested where it matters. Each app gets its own server and link, so the apps that run side by side do
not share bandwidth, only the cores.

The namespace is joined to the host by a veth pair. Its end holds two addresses: the executors reach the
server on the *shaped* one, and only replies from it are limited (a restore downloads; commits upload
little and their replies are small); the benchmark's own reads of the manifests use the *direct* one,
so watching the store costs the executors nothing. Within the rate, replies are spread over 64 queues by
the client's port and served in turn (htb classes that borrow up to the whole rate), so a commit's small
reply is not stuck behind a restore's download: a fair queue made of the two qdiscs this kernel has
(htb and pfifo; fq_codel and sfq are not built in). Needs root (network namespaces, tc).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from s3server import server
from s3server.server import S3Server

QUEUES = 64  # fair-queue buckets (a power of two: the client's port masked)
QUEUE_PACKETS = 20


@dataclass(frozen=True)
class Link:
    """One app's link: namespace `streamapp-bench-<index>`, the host at 10.77.<index>.1."""

    index: int
    kbit: int

    @property
    def netns(self) -> str:
        return f"streamapp-bench-{self.index}"

    @property
    def host_side(self) -> str:
        return f"sabench{self.index}h"

    @property
    def server_side(self) -> str:
        return f"sabench{self.index}n"

    @property
    def shaped_ip(self) -> str:
        return f"10.77.{self.index}.2"

    @property
    def direct_ip(self) -> str:
        return f"10.77.{self.index}.3"


def _run(*argv: str, netns: str | None = None) -> None:
    command = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")


def up(link: Link) -> None:
    """The namespace, the veth pair and both addresses, not yet limited (`limit`); anything left by an
    earlier run of the same index is removed first."""
    if os.geteuid() != 0:
        raise PermissionError("the shaped link needs root (ip netns, tc)")
    down(link)
    ns, inside = link.netns, link.server_side
    _run("ip", "netns", "add", ns)
    _run("ip", "link", "add", link.host_side, "type", "veth", "peer", "name", inside)
    _run("ip", "link", "set", inside, "netns", ns)
    _run("ip", "addr", "add", f"10.77.{link.index}.1/24", "dev", link.host_side)
    _run("ip", "link", "set", link.host_side, "up")
    for ip in (link.shaped_ip, link.direct_ip):
        _run("ip", "addr", "add", f"{ip}/24", "dev", inside, netns=ns)
    _run("ip", "link", "set", "lo", "up", netns=ns)
    # 1500-byte packets into the queues, not 64 KiB segments (a queue's length is in packets)
    _run("ip", "link", "set", inside, "gso_max_size", "1500", "up", netns=ns)


def limit(link: Link) -> None:
    """htb at the root: class 1:1 holds the shaped address's replies to `kbit`, spread over QUEUES
    child classes by the low bits of the destination port; everything else goes unshaped (1:2)."""
    ns, dev = link.netns, link.server_side
    tc = ("tc",)
    _run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2", "r2q", "1", netns=ns)
    rate = f"{link.kbit}kbit"
    _run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate,
         "quantum", "1514", netns=ns)  # fmt: skip
    _run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:2", "htb", "rate", "10gbit",
         "quantum", "60000", netns=ns)  # fmt: skip
    share = f"{max(1, link.kbit // QUEUES)}kbit"
    for queue in range(QUEUES):
        classid = f"1:{100 + queue:x}"
        _run(*tc, "class", "add", "dev", dev, "parent", "1:1", "classid", classid, "htb", "rate", share,
             "ceil", rate, "quantum", "1514", netns=ns)  # fmt: skip
        _run(
            *tc, "qdisc", "add", "dev", dev, "parent", classid, "pfifo", "limit", str(QUEUE_PACKETS), netns=ns
        )
    _run(*tc, "filter", "add", "dev", dev, "parent", "1:", "prio", "1", "handle", "2:", "protocol", "ip",
         "u32", "divisor", str(QUEUES), netns=ns)  # fmt: skip
    for queue in range(QUEUES):
        _run(*tc, "filter", "add", "dev", dev, "parent", "1:", "prio", "1", "protocol", "ip", "u32",
             "ht", f"2:{queue:x}:", "match", "ip", "src", f"{link.shaped_ip}/32",
             "flowid", f"1:{100 + queue:x}", netns=ns)  # fmt: skip
    # the TCP header follows a 20-byte IP header: its second 16 bits are the destination port
    _run(*tc, "filter", "add", "dev", dev, "parent", "1:", "prio", "1", "protocol", "ip", "u32",
         "ht", "800::", "match", "ip", "src", f"{link.shaped_ip}/32",
         "hashkey", "mask", f"0x{QUEUES - 1:08x}", "at", "20", "link", "2:", netns=ns)  # fmt: skip


def unlimit(link: Link) -> None:
    """Back to full speed (the root qdisc and every class and filter under it go)."""
    _run("tc", "qdisc", "del", "dev", link.server_side, "root", netns=link.netns)


def down(link: Link) -> None:
    """Remove the namespace (its end of the pair, and with it the host's, go too)."""
    subprocess.run(["ip", "netns", "del", link.netns], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", link.host_side], capture_output=True, check=False)


@dataclass(frozen=True)
class ShapedServer:
    """An app's S3 server: `shaped` for the executors, `direct` for the benchmark's reads. The link
    runs at full speed until `limit`: the pre-load and its first snapshots are set-up, not a scenario
    (each owner builds its snapshot from the segments in the store, so a limited link would take the
    pre-load's whole changelog through it once more)."""

    link: Link
    shaped: S3Server
    direct: S3Server

    def limit(self) -> None:
        limit(self.link)

    def unlimit(self) -> None:
        unlimit(self.link)


@contextmanager
def shaped_server(link: Link, state_dir: Path) -> Iterator[ShapedServer]:
    """A running S3 server behind `link` (not limited yet); server and link are gone when the block ends."""
    up(link)
    try:
        started = server.start(state_dir, netns=link.netns, ip=link.shaped_ip)
        try:
            yield ShapedServer(link, started, started.at(link.direct_ip))
        finally:
            server.stop(state_dir)
    finally:
        down(link)
