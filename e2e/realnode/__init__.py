"""A real node for the local cluster: containerd, runc, CNI plugins, the kubelet and kube-proxy running
as root on this machine, so pods run as containers of the built image (see ``e2e/README.md``)."""
