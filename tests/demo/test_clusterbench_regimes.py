"""The cluster benchmark's two state regimes: each its own series and report, one summary of both, and
the lost-task choices it records (bench/cluster.py, bench/clusterbench/)."""

from __future__ import annotations

from pathlib import Path

from clusterbench import series
from clusterbench.analysis import choices
from clusterbench.apps import BenchApp
from clusterbench.runner import Run, Settings, Window, keep_logs
from localcluster.controlplane import LocalCluster


def test_each_regime_has_a_series_of_its_own(tmp_path: Path) -> None:
    for regime, number in (("small", 1), ("small", 2), ("large", 1), ("small", 10)):
        series.write(series.run_path(tmp_path, regime, number), {"n": number})
    assert [p.name for p in series.recorded(tmp_path, "small")] == [
        "small-1.json.gz",
        "small-2.json.gz",
        "small-10.json.gz",
    ]
    assert [p.name for p in series.recorded(tmp_path, "large")] == ["large-1.json.gz"]


def test_the_large_regimes_outputs_sit_beside_the_small_ones() -> None:
    results = Path("bench/results")
    assert series.regime_path(results / "cluster.md", "small") == results / "cluster.md"
    assert series.regime_path(results / "cluster.md", "large") == results / "cluster-large.md"
    assert series.regime_path(results / "cluster-notes.md", "large") == results / "cluster-large-notes.md"
    assert series.regime_path(Path("bench/scenarios/calibrated"), "large") == Path(
        "bench/scenarios/calibrated-large"
    )


def test_the_summary_keeps_regimes_apart_and_a_run_recorded_before_them_is_small() -> None:
    row = {
        "phase": "bounce",
        "protocol": "streamapp",
        "gaps": {"stall_s": 1.0, "worst_task_stall_s": 1.0},
        "restored_blocking": 0,
        "restored_background": 0,
    }
    old = {"settings": {"partitions": 4}, "exactly_once": {"streamapp": "ok"}, "rows": [row]}
    large = {"settings": {"regime": "large"}, "exactly_once": {"streamapp": "ok"}, "rows": [row]}
    entries = series.summary([old, large])
    assert [(e["state"], len(e["runs"])) for e in entries] == [("small", 1), ("large", 1)]


def test_the_large_settings_restore_over_a_slow_link_from_lmdb() -> None:
    settings = Settings.large(Path("out"))
    assert (settings.regime, settings.local_store) == ("large", "lmdb")
    assert settings.link_kbit > 0
    assert settings.keys >= 4 * 1_000_000  # millions of keys per task
    assert Settings(Path("out")).regime == "small"


def test_the_choices_in_a_window_are_timed_from_its_action(tmp_path: Path) -> None:
    app = BenchApp("streamapp", tmp_path, 4, None)
    app.choices = [
        (99.5, "WaitingForMember", "member 0: before"),
        (100.0, "RestoringElsewhere", "member 0: restoring elsewhere"),
        (101.5, "RestoredElsewhere", "task 1 restored on 1"),
        (130.0, "WaitingForMember", "member 1: after"),
    ]
    run = Run(Settings(out=tmp_path))
    run.apps = [app]
    run.windows = [Window("bounce", "streamapp", 2, 99.0, 110.0, 120.0)]
    assert choices(run) == {
        "bounce/streamapp": [
            [0.5, "WaitingForMember", "member 0: before"],
            [1.0, "RestoringElsewhere", "member 0: restoring elsewhere"],
            [2.5, "RestoredElsewhere", "task 1 restored on 1"],
        ]
    }


def test_a_runs_logs_are_kept_beside_its_output(tmp_path: Path) -> None:
    """The next cluster's start deletes the executors' logs: the run copies them out first, logs only."""
    cluster = LocalCluster(tmp_path / "cluster")
    pod = cluster.layout.process_node / "pods" / "ns" / "counts-0" / "executor"
    pod.mkdir(parents=True)
    (pod / "executor.log").write_text("took over task 1\n")
    (pod / "executor.pid").write_text("42")
    cluster.layout.logs.mkdir(parents=True)
    (cluster.layout.logs / "kube-apiserver.log").write_text("serving\n")
    keep_logs(cluster, tmp_path / "out")
    (kept,) = (tmp_path / "out" / "cluster-bench-logs").iterdir()
    executor = kept / "executors" / "pods" / "ns" / "counts-0" / "executor"
    assert sorted(p.name for p in executor.iterdir()) == ["executor.log"]
    assert (kept / "control-plane" / "kube-apiserver.log").read_text() == "serving\n"
