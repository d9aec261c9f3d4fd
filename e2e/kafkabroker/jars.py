"""Resolve the broker's jars from Maven Central, once, into a versioned cache directory.

Maven (Debian's ``maven`` package) reads the pinned `pom.xml` and copies ``kafka_2.13`` with its runtime
dependencies into a staging directory next to the cache entry, which is renamed into place only when
complete: an interrupted resolve never leaves a half cache, and a cache hit costs one ``stat``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from localcluster.gotool import cache_base, swap_in

POM = Path(__file__).resolve().parent / "pom.xml"
MAVEN_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def version() -> str:
    """The pinned broker version (the `kafka_2.13` dependency of `pom.xml`: the one place it is set)."""
    found = (
        ElementTree.parse(POM)
        .getroot()
        .find("m:dependencies/m:dependency[m:artifactId='kafka_2.13']/m:version", MAVEN_NS)
    )
    if found is None or not found.text:
        raise RuntimeError(f"{POM} pins no kafka_2.13 version")
    return found.text.strip()


def cache_dir() -> Path:
    """``<cache>/kafka/<version>``: ``libs/`` (the classpath) and ``m2/`` (Maven's local repository)."""
    return cache_base() / "kafka" / version()


def libs() -> Path:
    """The broker's classpath directory, resolved first when not cached."""
    final = cache_dir() / "libs"
    if not final.is_dir():
        resolve(final)
    return final


def resolve(final: Path) -> None:
    """Copy the pinned artifact and its runtime dependencies into `final` (atomically, see module doc)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn not found: install Debian's maven package (apt-get install maven)")
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".libs-") as staging:
        argv = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(POM),
            f"-Dmaven.repo.local={final.parent / 'm2'}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"resolving the Kafka jars failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
            )
        swap_in(Path(staging), final)
