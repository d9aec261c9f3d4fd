"""Install the pinned S3 server once into the shared cache, by name from PyPI."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from localcluster.gotool import cache_base, cache_lock

PACKAGE = "moto[server]"
VERSION = "5.2.5"
_DONE = ".installed"


def install_dir() -> Path:
    return cache_base() / "s3server" / VERSION


def server_binary() -> Path:
    return install_dir() / "bin" / "moto_server"


def ensure_installed() -> float | None:
    """Create the cached virtualenv unless it is complete already; returns seconds spent (None if cached).

    A virtualenv cannot be moved after creation (its scripts name their interpreter by absolute path), so
    it is built in place under a lock and marked complete last; an unmarked directory is a crashed
    install and is rebuilt.
    """
    target = install_dir()
    if (target / _DONE).exists():
        return None
    with cache_lock(target.parent):
        if (target / _DONE).exists():
            return None
        started = time.monotonic()
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
        pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, f"{PACKAGE}=={VERSION}"], check=True)
        (target / _DONE).write_text(f"{PACKAGE}=={VERSION}\n")
        return time.monotonic() - started
