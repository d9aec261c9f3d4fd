"""Kafka endpoints of a StreamApp (`pipeline.source.kafka`, `pipeline.sink.kafka`) and the names the
operator and the executor share for them.

A StreamApp never holds Kafka credentials: `credentials` names a Secret and the operator maps its keys
into the member pods as the `CREDENTIAL_ENV` variables (`secretKeyRef`), which the executor turns into
librdkafka properties; properties that carry secrets are refused in `properties`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from streamapp.api.fields import Rule, prop
from streamapp.api.wiremodel import Model

# librdkafka property → environment variable holding its value; `{role}` is SOURCE or SINK.
CREDENTIAL_ENV = {
    "sasl.username": "STREAMAPP_KAFKA_{role}_USERNAME",
    "sasl.password": "STREAMAPP_KAFKA_{role}_PASSWORD",
}
# Properties whose values are secrets: they come from `credentials`, never from the StreamApp.
SECRET_PROPERTIES = (
    "sasl.password",
    "sasl.username",
    "sasl.jaas.config",
    "sasl.oauthbearer.client.secret",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.key.pem",
)
# Set by the executor, because exactly-once and explicit offsets depend on them.
RESERVED_PROPERTIES = ("bootstrap.servers", "transactional.id", "group.id", "isolation.level")
TOPIC_PATTERN = "^[a-zA-Z0-9._-]{1,249}$"
BOOTSTRAP_PATTERN = "^[^, ]+:[0-9]+(,[^, ]+:[0-9]+)*$"
MAX_PROPERTIES = 64
SECRET_NAME_PATTERN = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


def _refuse(names: tuple[str, ...], why: str) -> Rule:
    """A rule refusing any of these property names; its Python twin checks the same."""
    listed = ", ".join(f"'{name}'" for name in names)
    return Rule(
        f"!self.exists(k, k in [{listed}])",
        f"properties must not set {', '.join(names)}: {why}",
        lambda properties: not any(name in properties for name in names),
    )


def credential_env(role: str) -> dict[str, str]:
    """librdkafka property → the variable carrying it for `role` ("source" or "sink"); pure."""
    return {prop: name.format(role=role.upper()) for prop, name in CREDENTIAL_ENV.items()}


@dataclass(frozen=True, kw_only=True)
class KafkaCredentials(Model):
    """A Secret in the app's namespace holding the SASL username and password."""

    secret_name: str = field(
        metadata=prop(
            "Name of the Secret.",
            max_length=253,
            pattern=SECRET_NAME_PATTERN,
            pattern_message="secretName must be a Secret name (lower-case DNS subdomain)",
        )
    )
    username_key: str = field(default="username", metadata=prop("Key of the SASL username.", max_length=253))
    password_key: str = field(default="password", metadata=prop("Key of the SASL password.", max_length=253))


@dataclass(frozen=True, kw_only=True)
class KafkaTopic(Model):
    """One topic on one Kafka cluster; its partitions are the app's tasks (source) or its output (sink)."""

    PATH: ClassVar[str] = "kafka"

    bootstrap_servers: str = field(
        metadata=prop(
            "Comma-separated host:port list of brokers.",
            max_length=2048,
            pattern=BOOTSTRAP_PATTERN,
            pattern_message="bootstrapServers must be host:port[,host:port...]",
        )
    )
    topic: str = field(
        metadata=prop(
            "Topic name. A source topic must have exactly spec.partitions partitions.",
            max_length=249,
            pattern=TOPIC_PATTERN,
            pattern_message="topic must be 1-249 characters of letters, digits, '.', '_' and '-'",
        )
    )
    properties: dict[str, str] | None = field(
        default=None,
        metadata=prop(
            "librdkafka client properties (e.g. security.protocol, sasl.mechanism); secrets are refused "
            "here (use credentials), and bootstrap.servers, transactional.id, group.id and "
            "isolation.level are the executor's.",
            max_items=MAX_PROPERTIES,
            rules=(
                _refuse(
                    SECRET_PROPERTIES, "secrets go in credentials (a Secret reference), never in properties"
                ),
                _refuse(RESERVED_PROPERTIES, "the executor sets this property itself"),
            ),
        ),
    )
    credentials: KafkaCredentials | None = field(
        default=None, metadata=prop("Secret with the SASL credentials, passed to the pods as environment.")
    )
    # (a source reads read_committed: transactional input is seen once committed, aborted never)
    exactly_once: bool = field(
        default=True,
        metadata=prop(
            "Sink only: publish each committed batch in a Kafka transaction (exactly-once for "
            "read_committed consumers); false publishes at least once, for clusters without transactions."
        ),
    )


def secret_env(topic: KafkaTopic | None, role: str) -> list[dict[str, Any]]:
    """The pod's environment entries carrying `topic`'s credentials from its Secret; pure."""
    if topic is None or topic.credentials is None:
        return []
    secret = topic.credentials
    keys = {"sasl.username": secret.username_key, "sasl.password": secret.password_key}
    return [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": secret.secret_name, "key": keys[prop]}}}
        for prop, var in credential_env(role).items()
    ]
