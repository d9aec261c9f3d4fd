"""Names the operator and the executor share for Kafka endpoints.

A StreamApp never holds Kafka credentials: `pipeline.source.kafka.credentials` names a Secret and the
operator maps its keys into the member pods as these environment variables (`secretKeyRef`), which the
executor turns into librdkafka properties. `{role}` is SOURCE or SINK.
"""

from __future__ import annotations

# librdkafka property → environment variable holding its value.
CREDENTIAL_ENV = {
    "sasl.username": "STREAMAPP_KAFKA_{role}_USERNAME",
    "sasl.password": "STREAMAPP_KAFKA_{role}_PASSWORD",
}
