"""The test broker's cluster id: the storage tool must never read it as an option."""

from __future__ import annotations

import base64

from kafkabroker.broker import new_cluster_id


def test_cluster_ids_are_16_random_bytes_that_never_start_with_a_dash() -> None:
    """Old ids started with "-" one time in 64; among 2,000 draws some would have."""
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert not any(cluster_id.startswith("-") for cluster_id in ids)
    assert all(len(base64.urlsafe_b64decode(cluster_id + "==")) == 16 for cluster_id in ids)
