"""A frame of lines redrawn in place on a terminal, printed now and then when the output is a file or a
pipe: what `make demo` and `streamapp status --watch` show their live tables with. Plain ANSI escapes."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

BOLD, DIM, RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


def fit(line: str, width: int) -> str:
    """The line cut to the terminal's width: a wrapped line would break the redraw's line count."""
    if len(line) < width:
        return line
    return line[: max(1, width - 1)] + (RESET if "\x1b[" in line else "")


class Screen:
    """Draws frames: in place on a terminal, one every `plain_every_s` seconds otherwise."""

    def __init__(self, out: TextIO = sys.stdout, plain_every_s: float = 10.0) -> None:
        self.out = out
        self.tty = out.isatty()
        self.plain_every_s = plain_every_s
        self.drawn = 0
        self.last_plain = float("-inf")

    def draw(self, lines: list[str]) -> None:
        if self.tty:
            up = f"\x1b[{self.drawn}F" if self.drawn else ""
            width = shutil.get_terminal_size().columns
            self.out.write(up + "".join(f"\x1b[2K{fit(line, width)}\n" for line in lines) + "\x1b[J")
            self.drawn = len(lines)
        elif time.monotonic() - self.last_plain >= self.plain_every_s:
            self.out.write("\n".join(lines) + "\n")
            self.last_plain = time.monotonic()
        self.out.flush()

    def keep(self) -> None:
        """Leave the frame on screen: what follows is written below it instead of over it."""
        self.drawn = 0

    def say(self, text: str) -> None:
        """A line that stays above the table (the table is redrawn below it)."""
        if self.tty and self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0
        self.out.write(text + "\n")
        self.out.flush()
