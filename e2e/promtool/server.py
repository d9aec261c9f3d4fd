"""A Prometheus server beside the local cluster, scraping what a ServiceMonitor names.

The cluster runs no prometheus-operator, so the scrape job is derived here from the chart's own
ServiceMonitor endpoint, field by field as prometheus-operator translates it (honorLabels →
honor_labels, interval → scrape_interval, path, scheme); only the target differs: the process's
address, since nothing routes a Service's ClusterIP here.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localcluster import processes
from promtool import install

READY_TIMEOUT_S = 60.0


def scrape_job(service_monitor: Mapping[str, Any], target: str) -> dict[str, Any]:
    """The scrape config of the ServiceMonitor's first endpoint, aimed at ``host:port``; pure."""
    endpoint = service_monitor["spec"]["endpoints"][0]
    job: dict[str, Any] = {
        "job_name": service_monitor["metadata"]["name"],
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
        "static_configs": [{"targets": [target]}],
    }
    if "interval" in endpoint:
        job["scrape_interval"] = endpoint["interval"]
    return job


@dataclass(frozen=True)
class Prometheus:
    """A running server and its HTTP API."""

    record: processes.ProcessRecord
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expression: str) -> list[dict[str, Any]]:
        """An instant query's result vector (`/api/v1/query`); raises with Prometheus's error."""
        query = urllib.parse.urlencode({"query": expression})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:  # a query Prometheus refuses: 400 with its reason
            raise RuntimeError(
                f"query {expression!r} failed: {error.read().decode(errors='replace')}"
            ) from None
        if body.get("status") != "success":
            raise RuntimeError(f"query {expression!r} failed: {body}")
        return list(body["data"]["result"])

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule with its health and last error (`/api/v1/rules`)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=10) as response:
            body = json.load(response)
        return [rule for group in body["data"]["groups"] for rule in group["rules"]]


@contextmanager
def running(
    workdir: Path, jobs: list[dict[str, Any]], rules: Mapping[str, Any] | None = None
) -> Iterator[Prometheus]:
    """Prometheus with ``jobs`` and the rule ``groups`` of ``rules`` (evaluated every second), built
    first if needed, ready; stopped when the block ends."""
    install.ensure_server_installed()
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "global": {"scrape_interval": "15s", "evaluation_interval": "1s"},
        "scrape_configs": jobs,
    }
    if rules is not None:
        (workdir / "rules.yml").write_text(yaml.safe_dump(dict(rules)))
        config["rule_files"] = [str(workdir / "rules.yml")]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = processes.free_port()
    argv = [
        str(install.server_binary()),
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    record = processes.spawn("prometheus", argv, workdir / "prometheus.log")
    server = Prometheus(record, port)
    try:
        processes.wait_until(
            lambda: processes.http_ok(f"{server.url}/-/ready"), READY_TIMEOUT_S, "Prometheus ready", record
        )
        yield server
    finally:
        processes.stop(record)
