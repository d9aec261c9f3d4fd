"""Units every setting shares: durations spelled the Kubernetes/Go way (`30s`, `5m`, `1h30m`) and
Kubernetes resource quantities (`2`, `500m`, `1Gi`) as numbers; pure.

The API model, the engine, the executor and the simulator all read these spellings, so each is parsed
in one place and a value means the same wherever it is written.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal


class UnitError(ValueError):
    """A duration is malformed or out of range; the message starts with the setting's key."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
MAX_DURATION_SECONDS = 30 * 24 * 3600.0
"""The longest duration a setting takes (720h): beyond it a deadline is a date nobody means, and one
near the float's range is no date at all."""
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object, key: str = "duration") -> float:
    """Seconds from `300`, `"300"`, `"5m"`, `"1h30m"` or `"250ms"` (the Kubernetes/Go style)."""
    if isinstance(value, bool):
        raise UnitError(f"{key}: expected a duration such as 5m or 30s, got {value!r}")
    text = value.strip() if isinstance(value, str) else None
    if isinstance(value, int | float):
        seconds = float(value)
    elif text is not None and re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    elif text is not None and re.fullmatch(rf"(?:{_DURATION_PART.pattern})+", text):
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
    else:
        raise UnitError(f"{key}: expected a duration such as 5m, 30s or 1h30m, got {value!r}")
    if seconds < 0:
        raise UnitError(f"{key}: must not be negative, got {value!r}")
    if seconds > MAX_DURATION_SECONDS:
        raise UnitError(f"{key}: must be at most 720h, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling of a duration (`300.0` → `5m`), for generated YAML and docs."""
    if seconds and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


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
