"""``python -m kedatool build [--force]`` (run with e2e/ on the path): build the pinned KEDA once."""

from __future__ import annotations

import sys

from kedatool import build
from localcluster import toolbuild

if __name__ == "__main__":
    sys.exit(toolbuild.main(build.TOOL, "kedatool"))
