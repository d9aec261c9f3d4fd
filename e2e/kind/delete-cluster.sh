#!/usr/bin/env bash
# Delete the kind cluster made by create-cluster.sh and its kubeconfig.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
kind delete cluster --name "${KIND_CLUSTER_NAME:-streamapp}"
rm -f "$repo/.cluster/kind-kubeconfig"
