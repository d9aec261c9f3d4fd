"""The image build's pure parts: mirror lines, cache keys, pip settings (no podman needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from imagebuild import aptsources, base, context, podman, settings

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main

Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
"""


def test_deb822_entries_of_the_suite_only() -> None:
    assert aptsources.parse_deb822(DEB822, "bookworm") == [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
    ]


def test_one_line_entries_drop_options_and_other_suites() -> None:
    text = (
        "deb [signed-by=/k.gpg arch=amd64] https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"
        "# deb http://old/debian bookworm main\n"
        "deb [trusted=yes] http://mirror/debian-security bookworm-security main contrib\n"
    )
    assert aptsources.parse_one_line(text, "bookworm") == [
        "deb http://mirror/debian-security bookworm-security main contrib"
    ]


def test_hosts_without_entries_use_debians_default_mirrors(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "other.list.disabled").write_text("deb http://x/debian bookworm main\n")
    assert (
        aptsources.host_mirror_lines("bookworm", tmp_path)[0]
        == "deb http://deb.debian.org/debian bookworm main"
    )


def test_base_key_follows_the_package_list(monkeypatch: pytest.MonkeyPatch) -> None:
    before = base.key()
    assert base.key() == before
    monkeypatch.setattr(settings, "BASE_PACKAGES", (*settings.BASE_PACKAGES, "procps"))
    assert base.key() != before


def test_content_digest_sees_paths_and_contents() -> None:
    entries = {"src/a.py": b"x = 1\n", "Containerfile": b"FROM base\n"}
    assert context.digest(entries) == context.digest(dict(reversed(entries.items())))
    assert context.digest(entries) != context.digest({**entries, "src/a.py": b"x = 2\n"})
    assert context.digest(entries) != context.digest(
        {"src/b.py": b"x = 1\n", "Containerfile": b"FROM base\n"}
    )
    assert context.digest(entries, "base=1") != context.digest(entries, "base=2")


def test_context_holds_the_package_sources_but_no_bytecode() -> None:
    names = context.files()
    assert {"images/Containerfile", "pyproject.toml", "README.md"} <= set(names)
    assert "operator/streamapp/cli.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".egg-info" in n]
    assert "pytest" not in context.requirements_text(), "dev extras must stay out of the image"


def test_the_image_installs_the_executor_extra_as_the_containerfile_reads_it() -> None:
    """The Containerfile derives the requirements itself (the build sees only its context): its reading
    of pyproject.toml must be the one the dependency layer's hash is computed from."""
    containerfile = (settings.REPO / context.CONTAINERFILE).read_text()
    line = next(x for x in containerfile.splitlines() if "python3 -c 'import tomllib" in x)
    code = line.split("'")[1].replace("/run/build/pyproject.toml", str(settings.PYPROJECT))
    derived = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert derived.stdout == context.requirements_text()
    assert "pyspark" in derived.stdout and "lmdb" in derived.stdout
    assert "matplotlib" not in derived.stdout, "plots are not run in the image"


def test_pip_secrets_carry_index_settings_and_the_ca(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("CERT")
    found = {
        "index-url": "https://mirror/simple",
        "default-timeout": "180",
        "find-links": "/opt/wheels",
        "cert": str(ca),
    }
    secrets = context.pip_secrets(tmp_path, found)
    conf = secrets["pipconf"].read_text().splitlines()
    assert conf[0] == "[global]"
    assert sorted(conf[1:]) == [
        "cert = /run/secrets/pipcert",
        "index-url = https://mirror/simple",
        "timeout = 180",
    ]
    assert secrets["pipcert"].read_text() == "CERT"
    bare = context.pip_secrets(tmp_path, {})
    assert bare["pipconf"].read_text() == "[global]\n" and bare["pipcert"].read_bytes() == b""


def test_ulimits_never_exceed_the_callers_hard_limits() -> None:
    import resource

    args = podman.ulimit_args()
    nofile = int(args[1].split("=")[1].split(":")[1])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert hard == resource.RLIM_INFINITY or nofile <= hard
