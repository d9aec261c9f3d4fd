"""Requests whose JSON body keeps its nulls: the typed client drops None values before sending, so
what a kubectl apply of `field: null` sends is posted here as written."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from streamapp.api.names import APPS, GROUP, VERSION


def create_app(
    api: client.ApiClient, namespace: str, body: dict[str, Any], dry_run: bool = False
) -> str | None:
    """POST a StreamApp as JSON, nulls and all; the API server's message when it refuses it (403 or
    422), else None."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{APPS}" + ("?dryRun=All" if dry_run else "")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    method, url, headers, _, _ = api.param_serialize(
        "POST", path, header_params=headers, auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, header_params=headers, body=body)
    data = response.read()
    if response.status >= 300:
        assert response.status in (403, 422), data
        return str(json.loads(data)["message"])
    return None
