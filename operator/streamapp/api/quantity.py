"""Kubernetes resource quantities (`2`, `1.5`, `500m`, `1Gi`) as numbers; pure.

The operator reads CPU requests of member pods as capacities (`controller.capacity`) and users write
capacities in the same notation (`spec.executor.memberCapacity`), so both go through this one parser.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

# The suffixes a Kubernetes quantity may carry, as multipliers.
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


def cpu_cores(quantity: object) -> float | None:
    """CPU cores of a Kubernetes quantity (`2`, `1.5`, `500m`); None when it is not a quantity or not
    positive and finite (a capacity of zero would mean "give it nothing", which a request never asks
    for)."""
    return _positive(quantity)


def byte_count(quantity: object) -> int | None:
    """Bytes of a Kubernetes quantity (`512Mi`, `1Gi`, `10G`), whole; None when it is not a positive
    quantity."""
    value = _positive(quantity)
    return int(value) if value is not None and value >= 1 else None


def _positive(quantity: object) -> float | None:
    match = _QUANTITY.match(str(quantity).strip()) if isinstance(quantity, (str, int, float)) else None
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    value = Decimal(number)
    if suffix in _BINARY:
        value *= 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value = value.scaleb(_DECIMAL[suffix])
    else:
        value = value.scaleb(int(suffix[1:]))
    cores = float(value)
    return cores if 0 < cores < math.inf else None
