"""The README and docs/ stay short, truthful about commands and free of dead links.

A newcomer reads README.md first and copies its commands, so it must stay readable in minutes, every
`make <target>` it names must exist in the Makefile, and every relative link in it and in docs/*.md
must lead to a file. The LICENSE must be the Apache License 2.0 that pyproject.toml declares.
Fast and offline: it reads files only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 450

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
# [text](target) or [text](target "title"); images (![alt](target)) match too.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MAKE_COMMAND = re.compile(r"(?:^|(?<=[\s`(]))make((?:[ \t]+[^\s`]+)+)", re.MULTILINE)
TARGET_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")
MAKEFILE_TARGET = re.compile(r"^([A-Za-z0-9][\w-]*)\s*:(?!=)", re.MULTILINE)


def markdown_files() -> list[Path]:
    """README.md and every Markdown document directly under docs/."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def without_code(text: str) -> str:
    """The text with fenced code blocks and inline code spans removed: links there are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def relative_link_targets(text: str) -> list[str]:
    """Targets of the Markdown links in `text` that point into the repository, anchors dropped."""
    targets = []
    for match in LINK.finditer(without_code(text)):
        target = match.group(1)
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        path = target.split("#", 1)[0].split("?", 1)[0]
        if path:
            targets.append(path)
    return targets


def make_targets_mentioned(text: str) -> set[str]:
    """The first target of every `make ...` command in `text`, in code or prose.

    Option flags (`-j4`) and variable assignments (`DEMO_ARGS=...`) around the target are skipped.
    """
    targets = set()
    for match in MAKE_COMMAND.finditer(text):
        for word in match.group(1).split():
            if word.startswith("-") or "=" in word:
                continue
            name = TARGET_NAME.match(word)
            if name is not None:
                targets.add(name.group(0).rstrip("."))
            break
    return targets


def makefile_targets() -> set[str]:
    """Targets defined in the Makefile (lines `name:`; variable assignments excluded)."""
    return set(MAKEFILE_TARGET.findall((ROOT / "Makefile").read_text(encoding="utf-8")))


def test_readme_is_at_most_450_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines; keep it under {MAX_README_LINES} and move detail to docs/"
    )


def test_relative_links_in_readme_and_docs_point_to_existing_files() -> None:
    checked = 0
    broken = []
    for document in markdown_files():
        for target in relative_link_targets(document.read_text(encoding="utf-8")):
            checked += 1
            if not (document.parent / target).exists():
                broken.append(f"{document.relative_to(ROOT)} -> {target}")
    assert checked > 0, "no relative links found: the link pattern no longer matches"
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_make_targets_named_in_readme_exist_in_makefile() -> None:
    mentioned = make_targets_mentioned(README.read_text(encoding="utf-8"))
    assert {"demo", "test"} <= mentioned, "the README must name `make demo` and `make test`"
    missing = sorted(mentioned - makefile_targets())
    assert not missing, f"README.md names make targets the Makefile does not define: {missing}"


def test_make_target_parsing_skips_flags_and_variables() -> None:
    text = "run `make test BENCH_ARGS=--quick`, `make -j4 lint` or make DEMO_ARGS='-h' demo."
    assert make_targets_mentioned(text) == {"test", "lint", "demo"}


def test_license_is_the_full_apache_2_0_text() -> None:
    license_file = ROOT / "LICENSE"
    assert license_file.is_file(), "LICENSE is missing"
    text = license_file.read_text(encoding="utf-8")
    header = [line.strip() for line in text.splitlines() if line.strip()][:3]
    assert header == ["Apache License", "Version 2.0, January 2004", "http://www.apache.org/licenses/"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
