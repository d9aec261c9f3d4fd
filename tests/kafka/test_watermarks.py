"""Watermark queries wait out a partition's leadership settling instead of failing the batch.

A unit test of `kafkaclient.watermarks` with a stand-in consumer: on the real broker the window (a
marker topic just created, its leader not yet taken up) is too short to hit on purpose; a loaded test
machine hit it once (NOT_LEADER_FOR_PARTITION from the sink's first marker read).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streamapp.executor.io import kafkaclient
from streamapp.executor.io.kafkaclient import watermarks

WHERE = TopicPartition("markers", 0)


class Consumer:
    """Answers with each of `answers` in turn: an error code raises, a pair is returned."""

    def __init__(self, *answers: int | tuple[int, int]) -> None:
        self.answers = list(answers)
        self.asked = 0

    def get_watermark_offsets(self, where: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        assert where == WHERE and not cached
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, int):
            raise KafkaException(KafkaError(answer))
        return answer


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafkaclient, "RETRY_PAUSE_S", 0.0)


def test_a_leader_not_yet_in_place_is_asked_again() -> None:
    consumer = Consumer(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, (0, 7))
    assert watermarks(consumer, WHERE) == (0, 7)  # type: ignore[arg-type]
    assert consumer.asked == 3


def test_other_errors_are_raised_at_once() -> None:
    consumer = Consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED, (0, 7))
    with pytest.raises(KafkaException):
        watermarks(consumer, WHERE)  # type: ignore[arg-type]
    assert consumer.asked == 1


def test_leadership_errors_are_raised_once_the_timeout_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafkaclient, "METADATA_TIMEOUT_S", 0.0)
    consumer = Consumer(KafkaError.NOT_LEADER_FOR_PARTITION, (0, 7))
    with pytest.raises(KafkaException):
        watermarks(consumer, WHERE)  # type: ignore[arg-type]
