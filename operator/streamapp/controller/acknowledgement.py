"""How far a member's executor has acknowledged its target, believed only as far as it can be true.

`status.observedGeneration` is written by the member's own executor (its ServiceAccount may patch its
member's status), and it steers the operator: it releases revocations (`handlers.Acknowledgements`,
the engine's `acked_generation`) and lifts the generation floor a rebuilt intent starts from
(`recovery.highest_generation`). The API server refuses a new one above `spec.generation`
(`api.member.StreamAppMember.RULES`), but objects stored before that rule, or written where it is not
installed, may hold anything: every read of it here goes through `acked_generation`, which clamps it
to the member's own target generation and logs the first sighting of each too-high value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from streamapp.api.member import acknowledged_generation

log = logging.getLogger(__name__)

# Per member object (uid), the too-high value last logged: one line per value, not per read.
_logged: dict[str, int] = {}


def acked_generation(body: Mapping[str, Any]) -> int:
    """The generation a StreamAppMember's executor acknowledged, no higher than its spec.generation."""
    target = target_generation(body)
    observed = _integer((body.get("status") or {}).get("observedGeneration"))
    believed = acknowledged_generation(target, observed)
    if observed > believed:
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or meta.get("name"))
        if _logged.get(uid) != observed:
            _logged[uid] = observed
            log.warning(
                "member %s reports status.observedGeneration %d above its spec.generation %d: "
                "believed only up to %d",
                meta.get("name"),
                observed,
                target,
                believed,
            )
    return believed


def target_generation(body: Mapping[str, Any]) -> int:
    """The generation of the target a StreamAppMember's spec holds (0 when it says none)."""
    return _integer((body.get("spec") or {}).get("generation"))


def _integer(value: Any) -> int:
    """A generation as written (an integer, or absent); anything else counts as 0."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
