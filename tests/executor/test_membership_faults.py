"""The membership client through API-server faults, against a scripted stand-in for the API.

Each failure class a client can meet — a refused or reset connection, a timeout, an HTTP error, a
410 in the watch stream — is met by the client's own code; the real API server (restarted, paused,
killed) is the subject of tests/integration/test_api_server_faults.py.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry
from recordingplane import RecordingPlane
from urllib3.exceptions import MaxRetryError, ProtocolError, ReadTimeoutError

from handclock import HandClock
from localcluster.waiting import wait_for
from streamapp.api.member import LocalCopy, StreamAppMemberSpec, TaskReport
from streamapp.executor.membership import MembershipClient, holding_back
from streamapp.executor.memberwatch import ClientSettings, backoff_delay
from streamapp.executor.probes import serve

FAST = ClientSettings(backoff_initial=0.01, backoff_max=0.05, watch_seconds=1)
FAILURES: list[Exception] = [
    ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
    MaxRetryError(None, "/apis", reason=ConnectionRefusedError(111, "Connection refused")),  # type: ignore[arg-type]
    ReadTimeoutError(None, "/apis", "Read timed out."),  # type: ignore[arg-type]
    ApiException(status=503, reason="Service Unavailable"),
    ApiException(status=403, reason="Forbidden"),
    ConnectionRefusedError(111, "Connection refused"),
    ValueError("a reply that is not JSON"),
]


def member(
    generation: int,
    uid: str = "uid-1",
    status: dict[str, Any] | None = None,
    lag_thresholds: tuple[int, ...] = (),
) -> dict[str, Any]:
    spec = StreamAppMemberSpec.of("counts", 0, generation, {generation: 1}, {}, (), (), False, lag_thresholds)
    body: dict[str, Any] = {
        "metadata": {"name": "counts-0", "uid": uid, "resourceVersion": str(100 + generation)},
        "spec": spec.to_dict(),
    }
    if status is not None:
        body["status"] = status
    return body


class Stream:
    """A watch response: these events, then the end the server puts to it (or a failure)."""

    def __init__(self, *events: dict[str, Any], fail: Exception | None = None) -> None:
        self.events, self.fail = events, fail

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        del amt, decode_content
        for event in self.events:
            yield (json.dumps(event) + "\n").encode()
        if self.fail is not None:
            raise self.fail

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class ScriptedApi:
    """Stands in for CustomObjectsApi: scripted lists and watches (failures among them), recorded
    status writes; once a script runs out, lists return the current object and watches end empty."""

    def __init__(self) -> None:
        self.lists: list[Any] = []
        self.watches: list[Any] = []
        self.write_failures: list[Exception] = []
        self.current = member(1)
        self.writes: list[dict[str, Any]] = []
        self.versions: list[str | None] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def list_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
        del args
        with self.lock:
            self.calls.append(("watch" if kwargs.get("watch") else "list", kwargs))
            script = self.watches if kwargs.get("watch") else self.lists
            step = script.pop(0) if script else None
        if isinstance(step, Exception):
            raise step
        if kwargs.get("watch"):
            threading.Event().wait(0.01)
            return step or Stream()
        return step or {"metadata": {"resourceVersion": "100"}, "items": [self.current]}

    def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> None:
        with self.lock:
            self.calls.append(("write", kwargs))
            if self.write_failures:
                raise self.write_failures.pop(0)
            self.writes.append(args[-1]["status"])
            self.versions.append((args[-1].get("metadata") or {}).get("resourceVersion"))

    def get_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
        del args
        with self.lock:
            self.calls.append(("get", kwargs))
            return self.current


def client_with(api: ScriptedApi, clock: HandClock | None = None) -> tuple[MembershipClient, RecordingPlane]:
    plane = RecordingPlane(echo=True)
    membership = MembershipClient(
        client.ApiClient(), "ns", "counts", 0, "pod-1", plane, 0.05, FAST, clock or HandClock()
    )
    membership.watch.custom = api  # type: ignore[assignment]
    return membership, plane


def seen(membership: MembershipClient, body: dict[str, Any]) -> None:
    """What the client's main loop does with each object its watch delivers."""
    membership.notice(body)
    membership.report()


def generations(plane: RecordingPlane) -> list[int]:
    return [t.generation for t in plane.applied]


def taken_up(membership: MembershipClient, api: ScriptedApi, body: dict[str, Any]) -> None:
    """Notice a target that gives the member a task: its confirmation (conditional on the object's
    version) goes out before the task starts, then the report that shows it running; the confirmation
    is dropped from `api.writes`, so the test counts reports from here."""
    before = len(api.writes)
    membership.notice(body)
    assert len(api.writes) == before + 2
    assert api.versions[before] == body["metadata"]["resourceVersion"]
    assert api.versions[before + 1] is None
    del api.writes[before], api.versions[before]


def test_the_watch_outlives_every_failure_class_and_follows_afterwards() -> None:
    api = ScriptedApi()
    api.lists = list(FAILURES)
    api.watches = [*FAILURES, Stream(fail=FAILURES[0]), Stream({"type": "MODIFIED", "object": member(2)})]
    membership, plane = client_with(api)
    stop = threading.Event()
    runner = threading.Thread(target=membership.run, args=(stop,), daemon=True)
    runner.start()
    try:
        wait_for(lambda: 2 in generations(plane), 30, "the target written after the failures applied")
        wait_for(lambda: any(w["observedGeneration"] == 2 for w in api.writes), 30, "the acknowledgement")
        assert membership.watcher is not None and membership.watcher.is_alive()
        assert runner.is_alive()
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive(), "stop ends the client"
    assert sum(kind == "list" for kind, _ in api.calls) > len(FAILURES), "every failure was met"
    assert all("_request_timeout" in call for _, call in api.calls), (
        "a call without a timeout can hang forever"
    )
    watches = [call for kind, call in api.calls if kind == "watch"]
    assert all(call["timeout_seconds"] == FAST.watch_seconds for call in watches)


def test_an_expired_version_lists_again_and_a_clean_end_resumes_from_the_last_version() -> None:
    api = ScriptedApi()
    api.watches = [
        Stream({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "150"}}}),
        Stream({"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}),
    ]
    membership, plane = client_with(api)
    api.lists = [{"metadata": {"resourceVersion": "100"}, "items": [member(1)]}]
    api.current = member(3)
    stop = threading.Event()
    runner = threading.Thread(target=membership.run, args=(stop,), daemon=True)
    runner.start()
    try:
        wait_for(lambda: 3 in generations(plane), 30, "the target found by listing again after 410")
    finally:
        stop.set()
        runner.join(10)
    reads = [(kind, call.get("resource_version")) for kind, call in api.calls if kind != "write"]
    assert reads[:4] == [("list", None), ("watch", "100"), ("watch", "150"), ("list", None)]


def test_a_failed_acknowledgement_is_written_again_after_a_backoff() -> None:
    api, clock = ScriptedApi(), HandClock()
    api.write_failures = [FAILURES[0], ApiException(status=500, reason="Internal Server Error")]
    plane = RecordingPlane([TaskReport(task=2, role="active", epoch=1)])  # it runs the task already
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 0, "pod-1", plane, 0.05, FAST, clock)
    membership.watch.custom = api  # type: ignore[assignment]
    membership.notice(member(2))
    assert api.writes == []
    membership.report()
    assert api.writes == [], "retried before its backoff"
    clock.now += FAST.backoff_max
    membership.report()
    assert api.writes == []
    clock.now += FAST.backoff_max
    membership.report()
    assert [w["observedGeneration"] for w in api.writes] == [2]


def test_a_target_is_confirmed_before_its_task_starts_and_read_again_when_it_cannot_be() -> None:
    """An executor takes up a task only once the API server accepted its acknowledgement at the
    version it read the target from: refused (409: the object changed since), the member is read again
    at once and what it holds then is followed; failed otherwise, read again after a backoff."""
    api, clock = ScriptedApi(), HandClock()
    api.write_failures = [ApiException(status=409, reason="Conflict")]
    api.current = member(3)  # what the operator wrote meanwhile
    membership, plane = client_with(api, clock)
    membership.notice(member(2))
    assert [t.active_epochs() for t in plane.applied] == [{}], "task 2 started unconfirmed"
    assert api.writes == []
    membership.catch_up()
    assert [t.active_epochs() for t in plane.applied][-1] == {3: 1}
    assert 2 not in {task for t in plane.applied for task in t.active_epochs()}
    assert api.writes[0]["observedGeneration"] == 3 and api.versions[0] == "103"

    api, clock = ScriptedApi(), HandClock()
    api.write_failures = [FAILURES[1]]
    api.current = member(2)
    membership, plane = client_with(api, clock)
    membership.notice(member(2))
    membership.catch_up()
    assert not [c for c in api.calls if c[0] == "get"], "read again before the backoff"
    clock.now += FAST.backoff_max
    membership.catch_up()
    assert [t.active_epochs() for t in plane.applied][-1] == {2: 1}
    assert api.writes[0]["observedGeneration"] == 2


def test_the_report_is_asserted_again_periodically_and_at_once_for_a_new_or_empty_member() -> None:
    api, clock = ScriptedApi(), HandClock()
    membership, _ = client_with(api, clock)
    reported = {"observedGeneration": 2, "podUID": "pod-1"}
    taken_up(membership, api, member(2, status=reported))
    assert len(api.writes) == 1
    clock.now += 1
    seen(membership, member(2, status=reported))
    assert len(api.writes) == 1, "an unchanged report within the interval is not written again"
    clock.now += FAST.reassert_interval
    membership.report()
    assert len(api.writes) == 2, "the report is re-asserted every reassert_interval"
    seen(membership, member(2, uid="uid-2", status=reported))
    assert len(api.writes) == 3, "a re-created member gets the report at once"
    seen(membership, member(2, uid="uid-2"))
    assert len(api.writes) == 4, "a member whose status is empty gets the report at once"
    assert {w["observedGeneration"] for w in api.writes} == {2}


def test_healthy_only_while_the_watch_hears_from_the_api_server() -> None:
    api, clock = ScriptedApi(), HandClock()
    membership, _ = client_with(api, clock)
    assert not membership.healthy(), "ready before the target was ever read"
    membership.watch.list_member(lambda body: None)
    assert membership.healthy()
    clock.now += FAST.unhealthy_after + 1
    assert not membership.healthy()


@pytest.mark.parametrize("failures", [1, 2, 5, 50])
def test_backoff_doubles_up_to_its_cap_with_jitter(failures: int) -> None:
    settings = ClientSettings(backoff_initial=0.5, backoff_max=8.0)
    step = min(8.0, 0.5 * 2 ** (failures - 1))
    low, high = backoff_delay(failures, settings, lambda: 0.0), backoff_delay(failures, settings, lambda: 1.0)
    assert (low, high) == (step / 2, step)


def test_a_prober_that_left_before_the_answer_is_no_error_but_a_fault_still_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = serve("127.0.0.1", 0, CollectorRegistry(), lambda: True)
    try:
        for gone in (BrokenPipeError(), ConnectionResetError()):
            try:
                raise gone
            except OSError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a fault of the handler")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a fault of the handler" in capsys.readouterr().err
    finally:
        server.server_close()


def test_readiness_follows_the_watch_and_liveness_does_not() -> None:
    following = [True]
    server = serve("127.0.0.1", 0, CollectorRegistry(), lambda: following[0])
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(base + path, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return error.code

    try:
        assert (status("/readyz"), status("/healthz")) == (200, 200)
        following[0] = False
        assert (status("/readyz"), status("/healthz")) == (503, 200)
        following[0] = True
        assert status("/readyz") == 200, "readiness returns without a restart"
    finally:
        server.shutdown()
        server.server_close()


class Progressing(RecordingPlane):
    """A data plane whose active tasks' input lag and a warmup's lag are set by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.input_lag, self.warmup_lag = 0, 500
        self.kept: tuple[LocalCopy, ...] = ()

    def reports(self) -> list[TaskReport]:
        active = [
            TaskReport(task=t.task, role="active", epoch=t.epoch, lag=0, input_lag=self.input_lag)
            for t in (self.applied[-1].active if self.applied else ())
        ]
        return [*active, TaskReport(task=9, role="warmup", epoch=0, lag=self.warmup_lag)]

    def local_copies(self) -> tuple[LocalCopy, ...]:
        return self.kept


def test_progress_alone_is_reported_at_most_every_progress_interval_and_what_the_operator_acts_on_at_once() -> (
    None
):
    api, clock = ScriptedApi(), HandClock()
    plane = Progressing()
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 0, "pod-1", plane, 2.0, FAST, clock)
    membership.watch.custom = api  # type: ignore[assignment]
    taken_up(membership, api, member(2))
    assert len(api.writes) == 1
    for lag in (10, 20, 30):  # input keeps coming: progress only
        clock.now += 2.5
        plane.input_lag, plane.warmup_lag = lag, 500 - lag
        membership.report()
    assert len(api.writes) == 1, "progress figures alone wait for the progress interval"
    clock.now += FAST.progress_interval
    membership.report()
    assert len(api.writes) == 2 and api.writes[-1]["tasks"][0]["inputLag"] == 30
    clock.now += 2.5
    plane.warmup_lag = 0  # the warmup caught up: the operator hands its task over on this
    membership.report()
    assert len(api.writes) == 3 and api.writes[-1]["tasks"][-1]["lag"] == 0
    clock.now += 0.1
    taken_up(membership, api, member(3))  # a new target is acknowledged at once, whatever the intervals
    assert [w["observedGeneration"] for w in api.writes][-1] == 3
    clock.now += 2.5
    plane.kept = (LocalCopy(task=4, applied_offset=700),)  # a copy given up earlier, pruned or kept
    membership.report()
    assert len(api.writes) == 4, "local copies alone are progress: they wait for its interval"
    clock.now += FAST.progress_interval
    membership.report()
    assert api.writes[-1]["localCopies"] == [{"task": 4, "appliedOffset": 700}]


class Hanging(RecordingPlane):
    """A data plane whose batch round hangs from `since` on (None: it does not)."""

    def __init__(self) -> None:
        super().__init__(echo=True)
        self.since: float | None = None

    def batch_running_since(self) -> float | None:
        return self.since


def test_a_hanging_batch_round_is_reported_within_the_report_interval_and_cleared_after() -> None:
    """What the operator replaces a stuck member by: reported once (not with every report), within
    the report interval, and cleared when the round ends."""
    api, clock = ScriptedApi(), HandClock()
    plane = Hanging()
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 0, "pod-1", plane, 2.0, FAST, clock)
    membership.watch.custom = api  # type: ignore[assignment]
    taken_up(membership, api, member(2))
    assert len(api.writes) == 1 and api.writes[-1].get("batchRunningSince") is None
    plane.since = 1767225600.0
    clock.now += 2.5
    membership.report()
    assert api.writes[-1]["batchRunningSince"] == "2026-01-01T00:00:00Z"
    for _ in range(3):
        clock.now += 2.5
        membership.report()
    assert len(api.writes) == 2, "a round still hanging changes nothing to write"
    plane.since = None
    clock.now += 2.5
    membership.report()
    assert len(api.writes) == 3 and api.writes[-1].get("batchRunningSince") is None


class Measuring(RecordingPlane):
    """A data plane that counts the records it processed and the seconds its rounds ran."""

    def __init__(self) -> None:
        super().__init__(echo=True)
        self.counters: tuple[int, float] | None = (1_200, 0.6)

    def processing(self) -> tuple[int, float] | None:
        return self.counters


def test_the_processing_counters_ride_along_with_the_reports() -> None:
    """What the operator's autoscaler measures a member's true rate by: the records processed and the
    busy seconds since the executor started, in every report (they alone never make one)."""
    api, clock = ScriptedApi(), HandClock()
    plane = Measuring()
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 0, "pod-1", plane, 2.0, FAST, clock)
    membership.watch.custom = api  # type: ignore[assignment]
    taken_up(membership, api, member(2))
    assert (api.writes[-1]["processedRecords"], api.writes[-1]["busySeconds"]) == (1_200, 0.6)
    plane.counters = (2_400, 1.2)
    clock.now += 2.5
    membership.report()
    assert len(api.writes) == 1, "counters alone are no reason to write"
    plane.counters = None
    membership.notice(member(3))
    assert api.writes[-1]["processedRecords"] is None


def test_a_copy_reaching_the_apps_handoff_lag_is_reported_at_once_not_with_progress() -> None:
    """With `handoffLag` 100 the operator hands a task over once its copy is 100 records behind: the
    member spec carries that threshold, and the executor reports the crossing within the report
    interval rather than the progress interval (up to 10 s later)."""
    api, clock = ScriptedApi(), HandClock()
    plane = Progressing()
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 0, "pod-1", plane, 2.0, FAST, clock)
    membership.watch.custom = api  # type: ignore[assignment]
    taken_up(membership, api, member(2, lag_thresholds=(100, 1_000)))
    assert len(api.writes) == 1
    clock.now += 2.5
    plane.warmup_lag = 400  # still above both thresholds: progress only
    membership.report()
    assert len(api.writes) == 1
    clock.now += 2.5
    plane.warmup_lag = 90  # within handoffLag: the operator revokes the owner on this
    membership.report()
    assert len(api.writes) == 2 and api.writes[-1]["tasks"][-1]["lag"] == 90
    clock.now += 2.5
    plane.warmup_lag = 10  # closer, but no threshold crossed: progress only again
    membership.report()
    assert len(api.writes) == 2


def test_watches_the_server_ends_at_once_and_empty_are_backed_off_not_spun() -> None:
    """A server (or a proxy in front of it) that ends every watch at once with nothing in it: the client
    backs off between them instead of reconnecting as fast as it can (a hundred times a second here)."""
    api = ScriptedApi()  # every watch after the script ends empty, 10 ms after it was opened
    settings = ClientSettings(backoff_initial=0.2, backoff_max=1.0, watch_seconds=1)
    membership = MembershipClient(
        client.ApiClient(),
        "ns",
        "counts",
        0,
        "pod-1",
        RecordingPlane(echo=True),
        0.05,
        settings,
        time.monotonic,
    )
    membership.watch.custom = api  # type: ignore[assignment]
    stop = threading.Event()
    runner = threading.Thread(target=membership.run, args=(stop,), daemon=True)
    runner.start()
    time.sleep(1.5)
    stop.set()
    runner.join(10)
    watches = sum(kind == "watch" for kind, _ in api.calls)
    assert 1 <= watches <= 8, f"{watches} watches in 1.5 s"


def test_a_target_held_back_takes_nothing_up_and_keeps_every_role_it_has() -> None:
    """What is applied before the confirmation: the target's revocations and copies as given; of the
    tasks it makes active, those running here at that epoch stay, a copy stays a copy, an owner at an
    older epoch keeps it, and one not here is listed as revoked (kept away, its local state kept)."""
    target = StreamAppMemberSpec.of("counts", 0, 7, {1: 3, 2: 4, 3: 5, 4: 2, 5: 6}, {6: 1}, (8,), (9,))
    running = [
        TaskReport(task=1, role="active", epoch=3),
        TaskReport(task=2, role="standby", epoch=0),
        TaskReport(task=3, role="warmup", epoch=0),
        TaskReport(task=4, role="active", epoch=1),
        TaskReport(task=6, role="active", epoch=1),
    ]
    interim = holding_back(target, running)
    assert interim is not None and interim.generation == 7
    assert interim.active_epochs() == {1: 3, 4: 1}
    assert (interim.standby, interim.warmup) == ((2, 8), (3, 9))
    assert interim.revoking_epochs() == {5: 6, 6: 1}
    assert holding_back(target, [*running, TaskReport(task=5, role="active", epoch=6)]) is not None
    settled = [TaskReport(task=t, role="active", epoch=e) for t, e in target.active_epochs().items()]
    assert holding_back(target, settled) is None
