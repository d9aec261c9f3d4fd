#!/usr/bin/env bash
# Run the integration suite against the kind cluster (creating it if needed). Extra arguments go to
# pytest. Tests that need the local process node skip themselves on kind.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
"$here/create-cluster.sh" >/dev/null
export STREAMAPP_KUBECONFIG="$repo/.cluster/kind-kubeconfig"
cd "$repo"
exec .venv/bin/python -m pytest -m integration tests/integration "$@"
