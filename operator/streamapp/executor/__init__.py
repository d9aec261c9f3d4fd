"""The executor data plane: per-partition PySpark micro-batches with exactly-once state and output.

Three parts, data flowing down:

* the process: `agent` (the member pod's loop), `podsettings` (who it is, from its environment),
  `probes` (readiness, liveness, metrics), `runtimeplane` (the runtime behind the membership client),
  `membership` (the protocol: follow the StreamAppMember's target, acknowledge, report) over
  `memberwatch` (its watch and status writes, through any outage of the API server),
  `runtime` (`Executor`, driven by a `Target`), `batches` / `slot` (the lanes rounds run on), `drain`,
  `spark` (the process's SparkSession), `dataplanecli` (`streamapp dataplane`, `generate`);
* a partition's work: `task` (one partition in one role), `pipeline` / `merge` (the user's transform
  and how its result folds into state), `samples` (example pipelines);
* `io` (sources, sinks, the publisher, the generator) and `state` (stores, changelog, manifests,
  snapshots, replicas, the shared blob stores). `state` knows nothing of Kafka or Spark.

Nothing is imported here: `state` and the CLI's helpers load without Spark (a test holds this).
"""
