#!/usr/bin/env bash
# make kind-test: the real-node tier (tests/node, `pytest -m node`) on kind, for people with Docker.
#
#   1. builds the image with `docker build -f images/Containerfile .` (public base by default);
#   2. creates a one-node kind cluster whose volumes directory is the same path here and in the node
#      (the tier's provisioner runs here and the tests read the claims the pods write);
#   3. loads the image into the node and runs the tier against the cluster (e2e/kindnode.py);
#   4. deletes the cluster it created (KIND_KEEP=1 keeps it; an existing cluster is reused and kept).
#
# Needs Linux (the volumes are bind-mounted from this machine), docker and kind on PATH (kind:
# `go install sigs.k8s.io/kind@latest`), and the venv, kubectl and helm that `make kind-test` builds first.
# --dry-run prints each command (and the kind configuration) instead of running it. Extra arguments go to
# pytest. KIND_CLUSTER_NAME and KIND_NODE_IMAGE override the defaults.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then
  dry_run=1
  shift
fi
name="${KIND_CLUSTER_NAME:-streamapp-node}"
node_image="${KIND_NODE_IMAGE:-kindest/node:v1.35.0}"
state="$repo/.cluster-kind/$name"
tag="$(cd "$repo/e2e" && "$repo/.venv/bin/python" -c 'from imagebuild.settings import image_tag; print(image_tag())')"

run() {
  if ((dry_run)); then
    printf '+ %s\n' "$*"
  else
    "$@"
  fi
}

kind_config() {
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    extraMounts:
      - hostPath: $state/volumes
        containerPath: $state/volumes
EOF
}

if ((!dry_run)); then
  for tool in docker kind; do
    command -v "$tool" >/dev/null || {
      echo "make kind-test needs $tool on PATH (see e2e/README.md, 'kind')" >&2
      exit 1
    }
  done
fi

run docker build -f "$repo/images/Containerfile" -t "$tag" "$repo"

run mkdir -p "$state/volumes"
created=0
if ((!dry_run)) && kind get clusters | grep -qx "$name"; then
  echo "kind cluster $name exists: reusing it"
else
  if ((dry_run)); then
    printf '+ cat > %s <<EOF\n%s\nEOF\n' "$state/kind.yaml" "$(kind_config)"
  else
    kind_config >"$state/kind.yaml"
  fi
  run kind create cluster --name "$name" --image "$node_image" --config "$state/kind.yaml" --wait 180s
  created=1
fi
cleanup() {
  if ((created)) && [[ "${KIND_KEEP:-0}" != 1 ]]; then
    run kind delete cluster --name "$name"
  fi
}
trap cleanup EXIT

if ((dry_run)); then
  printf '+ kind get kubeconfig --name %s > %s\n' "$name" "$state/kubeconfig"
else
  kind get kubeconfig --name "$name" >"$state/kubeconfig"
  chmod 600 "$state/kubeconfig"
fi
run kind load docker-image "$tag" --name "$name"

cd "$repo"
run env STREAMAPP_NODE=kind STREAMAPP_KIND_CLUSTER="$name" STREAMAPP_KIND_DIR="$state" \
  STREAMAPP_IMAGE="$tag" "$repo/.venv/bin/python" -m pytest -m node tests/node "$@"
