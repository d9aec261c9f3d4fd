"""What every data-plane benchmark shares at its edges: the same command line (`--write`, `--quick`)
and the same output (the Markdown printed, and written where `--write` says)."""

from __future__ import annotations

import argparse
from pathlib import Path


def arguments(doc: str, argv: list[str] | None) -> argparse.Namespace:
    """`--write FILE` and `--quick`, described by the first line of the benchmark's docstring."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the Markdown to this file")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    return parser.parse_args(argv)


def emit(lines: list[str], write: Path | None) -> None:
    """Print the report, and write it to `write` when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if write is not None:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(text)
