"""Fixtures of the executor tests: the shared store on both implementations."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataplane_checks import Stores

from streamapp.executor.state import s3store


@pytest.fixture(params=["file", "s3"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    """State and outputs in two directories (`file`), or under one prefix on the real S3 test server."""
    if request.param == "file":
        return Stores.under(tmp_path)
    root = s3store.S3Store.from_uri(request.getfixturevalue("s3_uri"))
    return Stores(root.child("state"), root.child("outputs"))
