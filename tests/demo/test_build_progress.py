"""The Go build's progress line (what `make demo` and `make k8s-binaries` print on a first run)."""

from __future__ import annotations

from localcluster.gotool import progress_line


def test_progress_line_estimates_the_time_left_from_the_rate_so_far() -> None:
    assert progress_line("kubernetes", 1000, 2500, 200.0) == (
        "  [kubernetes] 1000/2500 packages (40%), 200s, ~300s left"
    )


def test_no_estimate_before_the_first_package_or_after_the_last() -> None:
    assert progress_line("etcd", 0, 300, 15.0) == "  [etcd] 0/300 packages (0%), 15s"
    assert progress_line("etcd", 300, 300, 43.0) == "  [etcd] 300/300 packages (100%), 43s"
