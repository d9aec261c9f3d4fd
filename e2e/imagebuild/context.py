"""The build context, its content hash, and the host's pip settings handed to the build as secrets.

The context is assembled from an explicit file list rather than sent from the repository root (which
holds a virtualenv, caches and cluster state), in the repository's own layout, so the Containerfile
reads it as it reads the root a user builds from (``.dockerignore`` keeps the same files there):
``images/Containerfile``, ``pyproject.toml``, ``README.md`` and ``operator/``. The same list is hashed,
so the hash changes exactly when what the image is built from changes.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from imagebuild import settings

CONTAINERFILE = "images/Containerfile"
SKIPPED_PARTS = ("__pycache__", ".mypy_cache", ".pytest_cache")
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")
# pip options worth carrying into the build; find-links names host paths the build cannot see.
PIP_KEYS = {"index-url": "index-url", "extra-index-url": "extra-index-url", "trusted-host": "trusted-host"}
PIP_KEYS |= {"timeout": "timeout", "default-timeout": "timeout"}


def requirements_text() -> str:
    """pyproject's runtime dependencies, one per line, as the build derives them (no dev extras)."""
    return "".join(f"{requirement}\n" for requirement in settings.dependencies())


def requirements_digest() -> str:
    """The ``REQUIREMENTS_HASH`` build argument: it names the dependency layer in podman's layer cache
    (bind-mounted files are not part of a RUN step's cache key)."""
    return digest({"requirements": requirements_text().encode()})


def _source_files() -> list[Path]:
    root = settings.REPO / "operator"
    found = [settings.PYPROJECT, settings.REPO / "README.md"]
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in SKIPPED_PARTS or part.endswith(SKIPPED_SUFFIXES) for part in relative.parts):
            continue
        if path.is_file() and not path.name.endswith(SKIPPED_SUFFIXES):
            found.append(path)
    return found


def files() -> dict[str, bytes]:
    """Context-relative path → content, for everything the build sees."""
    content = {CONTAINERFILE: settings.CONTAINERFILE.read_bytes()}
    for path in _source_files():
        content[path.relative_to(settings.REPO).as_posix()] = path.read_bytes()
    return content


def digest(entries: dict[str, bytes], *extra: str) -> str:
    """sha256 over sorted (path, content) pairs and ``extra`` strings; pure."""
    hasher = hashlib.sha256()
    for text in extra:
        hasher.update(text.encode() + b"\0")
    for name in sorted(entries):
        hasher.update(name.encode() + b"\0" + hashlib.sha256(entries[name]).digest())
    return hasher.hexdigest()[:16]


def write(entries: dict[str, bytes], target: Path) -> None:
    """Materialize the context in an (empty) directory."""
    for name, data in entries.items():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def host_pip_settings() -> dict[str, str]:
    """The host's effective pip options (``pip config list``: files and ``PIP_*`` env, env wins)."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    )
    found: dict[str, str] = {}
    from_env: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, _, raw = line.partition("=")
        scope, _, key = name.rpartition(".")
        try:
            value = str(ast.literal_eval(raw))
        except (SyntaxError, ValueError):
            value = raw.strip("'\"")
        (from_env if scope == ":env:" else found)[key] = value
    return found | from_env


def pip_secrets(workdir: Path, pip: dict[str, str] | None = None) -> dict[str, Path]:
    """Secret files for the build: ``pipconf`` (a pip.conf) and ``pipcert`` (CA bundle, may be empty).

    Secrets, not build args: they never appear in the image's history, and a CA bundle or an index URL
    with credentials stays on the host.
    """
    settings_ = host_pip_settings() if pip is None else pip
    options = {PIP_KEYS[key]: value for key, value in sorted(settings_.items()) if key in PIP_KEYS}
    lines = ["[global]", *(f"{key} = {value}" for key, value in options.items())]
    cert = workdir / "pipcert"
    source = settings_.get("cert")
    if source and Path(source).is_file():
        shutil.copyfile(source, cert)
        lines.append("cert = /run/secrets/pipcert")
    else:
        cert.write_bytes(b"")
    conf = workdir / "pipconf"
    conf.write_text("\n".join(lines) + "\n")
    return {"pipconf": conf, "pipcert": cert}
