"""A real S3-API server for the tests: SeaweedFS (`weed mini`), built once from its Go module and run as a
process.

Why SeaweedFS: the S3 store's fencing rests on `PutObject` with `If-None-Match: *` answering 412 to every
writer but one, and that is exactly where servers differ (SeaweedFS ignored the header under concurrent
PUTs until its 2026 fix; an in-memory emulator such as moto checks it without a lock). So the tests run on
a server users run, at a pinned version that has the fix, and `tests/executor/state/test_s3_race.py` races 16
writers per key on it. It is Apache-2.0 and on the Go module proxy (a pseudo-version only); its go.mod
replaces one module with a fork, which the wrapper module repeats (`localcluster.gowrapper`). `weed mini`
runs master, volume server, filer and S3 gateway in one process; data lives in the state directory.

`install.ensure_installed()` builds `~/.cache/streamapp/seaweedfs-s3/<version>/weed`, trimmed to
`weed mini` by `build.trim` (about 2.5 min on 2 cores, with progress lines); `server.start` / `server.stop` run it; `python -m s3server install|down`
builds it or stops the one a cluster directory holds (`make cluster-down` calls it).
"""
