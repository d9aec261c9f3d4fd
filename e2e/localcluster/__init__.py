"""A real, local Kubernetes control plane run as plain processes (no containers).

The binaries are built from Go modules once (see :mod:`localcluster.build`) and cached under
``~/.cache/streamapp/k8s/<version>``; :mod:`localcluster.cluster` starts etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok and a process node, and stops them by PID.
"""
