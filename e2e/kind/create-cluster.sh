#!/usr/bin/env bash
# Create a kind cluster for the integration suite and write its kubeconfig to .cluster/kind-kubeconfig.
# Needs Docker (or podman) and kind on PATH. KIND_CLUSTER_NAME and KIND_NODE_IMAGE override the defaults.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
name="${KIND_CLUSTER_NAME:-streamapp}"
image="${KIND_NODE_IMAGE:-kindest/node:v1.35.0}"
kubeconfig="$repo/.cluster/kind-kubeconfig"
mkdir -p "$repo/.cluster"
if kind get clusters | grep -qx "$name"; then
  echo "kind cluster $name exists"
else
  kind create cluster --name "$name" --image "$image" --config "$here/cluster.yaml" --wait 120s
fi
kind get kubeconfig --name "$name" > "$kubeconfig"
chmod 600 "$kubeconfig"
echo "export STREAMAPP_KUBECONFIG=$kubeconfig"
