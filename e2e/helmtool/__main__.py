"""``python -m helmtool build [--force]`` (run with e2e/ on the path): build the pinned helm once."""

from __future__ import annotations

import sys

from helmtool import build
from localcluster import toolbuild

if __name__ == "__main__":
    sys.exit(toolbuild.main(build.tool(), "helmtool"))
