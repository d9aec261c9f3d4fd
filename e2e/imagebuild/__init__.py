"""Build the one StreamApp container image (operator and executor) without any container registry.

No registry is reachable, so nothing is pulled: a minimal Debian rootfs is made from Debian packages
with ``mmdebstrap`` (cached as a tarball keyed by its inputs, see :mod:`imagebuild.base`), imported into
podman as the base, and ``images/Containerfile`` installs the project on top of it
(:mod:`imagebuild.build`). :mod:`imagebuild.smoke` runs the result the way a pod would: non-root,
read-only root filesystem, writable ``/tmp`` only.

CLI: ``python e2e/image.py build|smoke|info`` (``make image``).
"""
