"""A partition's state and its records in the shared store, with no knowledge of Kafka or Spark.

Bottom up: `storage` (complete-or-absent file writes) and `keys` → `blobstore` / `s3store` (the shared
store) → `layout` (where a task's files live) → `manifest` (commit records and the pure history rules) →
`changelog` (per-batch deltas), `stores` / `lmdbstore` / `localstate` (the local key-value stores) →
`replica` (a partition's committed state rebuilt without Spark) and `restores` (how fast that runs);
`expiry` drops state past its time to live.
"""
