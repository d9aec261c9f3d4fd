"""The Debian mirror this machine's apt uses, as mmdebstrap mirror lines.

mmdebstrap must fetch from the same mirror as the host's apt (it may be the only one reachable), so the
host's active ``sources.list`` / ``*.sources`` entries for the target suite are reused. Third-party
repositories (other suites) and disabled files are left out; the lines are part of the base cache key.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

APT_DIR = Path("/etc/apt")
DEFAULT_MIRRORS = ("http://deb.debian.org/debian", "http://deb.debian.org/debian-security")


def _for_suite(suites: Iterable[str], suite: str) -> list[str]:
    """``bookworm``, ``bookworm-updates``, ``bookworm-security``; not ``cloud-sdk-bookworm``."""
    return [s for s in suites if s == suite or s.startswith(f"{suite}-")]


def parse_deb822(text: str, suite: str) -> list[str]:
    """One-line ``deb URI SUITE COMPONENTS`` entries of a deb822 ``.sources`` file; pure."""
    lines: list[str] = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for raw in stanza.splitlines():
            if raw.startswith("#") or ":" not in raw or raw[:1].isspace():
                continue
            key, value = raw.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
            continue
        components = fields.get("components", "main")
        for uri in fields.get("uris", "").split():
            lines.extend(
                f"deb {uri} {s} {components}" for s in _for_suite(fields.get("suites", "").split(), suite)
            )
    return lines


def parse_one_line(text: str, suite: str) -> list[str]:
    """``deb [opts] URI SUITE COMPONENTS...`` entries of a ``.list`` file, options dropped; pure."""
    lines: list[str] = []
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        if words[1].startswith("["):
            while not words[1].endswith("]"):
                words.pop(1)
            words.pop(1)
        if len(words) >= 4 and _for_suite([words[2]], suite):
            lines.append(" ".join(words))
    return lines


def host_mirror_lines(suite: str, apt_dir: Path = APT_DIR) -> list[str]:
    """Every active host entry for ``suite``; Debian's default mirrors when the host has none."""
    lines: list[str] = []
    files = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        if path.suffix == ".sources":
            lines.extend(parse_deb822(path.read_text(), suite))
        elif path.suffix == ".list" or path.name == "sources.list":
            lines.extend(parse_one_line(path.read_text(), suite))
    if lines:
        return lines
    main, security = DEFAULT_MIRRORS
    return [
        f"deb {main} {suite} main",
        f"deb {main} {suite}-updates main",
        f"deb {security} {suite}-security main",
    ]
