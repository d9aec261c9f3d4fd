"""A real S3-API server for the tests: moto's standalone server, pinned and cached, run as a process.

Why moto (`moto[server]` from PyPI): it implements `PutObject` with `If-None-Match: *` (412 when the key
exists) and ListObjectsV2, and it installs with pip in about a minute, where MinIO or SeaweedFS would add
a multi-minute Go build to a cold `make test` that already spends ~20 min building Kubernetes on 2 cores.
Its conditional writes are checked under concurrency by tests/executor/test_s3_race.py. It keeps objects
in memory, so a restarted server is empty: tests create their bucket after starting it.

`install.ensure_installed()` makes `~/.cache/streamapp/s3server/<version>/` (a virtualenv);
`server.S3Server` starts and stops it; `python -m s3server down` stops the one a cluster directory holds
(`make cluster-down` calls it).
"""
