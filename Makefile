# StreamApp Operator — developer entry points. Every target installs what it needs into .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
OUT := out
# A recipe line prefixed with $(TIMED) says, when it ends, its wall time and the CPU time of everything it ran
# (bash's `time`: children included), so make test's log shows what each build and test phase cost.
TIMED = TIMEFORMAT='make $@: %0R s wall, %0U s user + %0S s system CPU'; time

.PHONY: dist demo demo-sim demo-notice test test-loaded test-demo test-long test-node test-autoscaling kind-test node-binaries unit lint bench bench-scale bench-apiscale bench-cluster bench-cluster-large bench-cluster-report chaos crds cluster-up cluster-down kafka-up k8s-binaries helm s3server promtool prometheus keda image system-packages clean bench-autoscale bench-memory-limit bench-replay

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## demo: the real operator at work: the local control plane, the operator installed with its Helm chart,
## a sample app with real PySpark executors under input, scaled out, an executor killed and back, watched
## live; then the measured downtime per task, the exactly-once check and out/demo-timeline.png
demo: demo-notice $(STAMP) k8s-binaries helm
	@mkdir -p $(OUT)
	PYTHONPATH=e2e:tests/executor $(PY) -m demo --out $(OUT) $(DEMO_ARGS)

demo-notice:
	@echo "make demo: the first run on a machine builds Kubernetes, the volume provisioner and helm from Go"
	@echo "modules (about 7 min on a quiet 2-core machine, up to 14 min under load; progress and an estimate of"
	@echo "the time left every 15 s); they are cached in ~/.cache/streamapp, so later runs start the control"
	@echo "plane in about 10 s. The demo itself then takes about 5 to 8 minutes on 2 shared cores."

## demo-sim: the simulator on the sample scenario with all three protocols, side by side (no cluster)
demo-sim: $(STAMP)
	@mkdir -p $(OUT)
	$(VENV)/bin/streamapp simulate bench/scenarios/demo.yaml \
	  --protocol eager --protocol cooperative --protocol streamapp \
	  --plot $(OUT)/demo-timeline.png

## test: lint, type-check, build what the tests run (control plane, helm, promtool, the S3 server, the image, the
## real node), then every tier but long, demo and autoscaling (their own targets). From nothing the builds take most of
## the time, so they overlap the tests: the control plane builds while the tests that need no build run
## (tests/conftest.py marks the others `built`); then those run while the rest builds at low priority
## (nice 19) in the background, and the tests that need the rest come last (they wait on its build lock if it
## is not done). Build output: out/test-build-first.log and out/test-build-late.log, shown as each ends.
## The built tests run as two sessions side by side: those on the local clusters and the Kafka broker (one
## session: they share them), and the rest (chart, alerts, the S3 server's, the image's), whose output is
## out/test-built-apart.log, shown when both end. The cluster tests mostly wait on pods and conditions (a cold
## run: 30 min of wall time for 20 min of CPU on two cores), so the rest fits in beside them — and so do the
## executor's own tests (tests/executor: Spark, LMDB, a million keys), which need no build but are the
## heaviest of those that need none: run during the control plane's build they held it up (a cold run at
## 7ae6022: 846 s of tests against a 725-s build, the two sharing two cores).
TEST_MARKS := not demo and not long and not autoscaling
APART := not integration and not node and not kafka
test: $(STAMP)
	@mkdir -p $(OUT)
	@echo "make test: building the control plane ($(OUT)/test-build-first.log); at low priority lint, helm, promtool,"
	@echo "  the S3 server, the image and the real node's binaries ($(OUT)/test-build-late.log); meanwhile the tests that need none of it"
	@$(MAKE) -j2 system-packages k8s-binaries > $(OUT)/test-build-first.log 2>&1 & first=$$!; \
	( nice -n 19 $(MAKE) -j3 lint helm s3server promtool image && nice -n 19 $(MAKE) node-binaries ) \
	  > $(OUT)/test-build-late.log 2>&1 & late=$$!; \
	TIMEFORMAT="make test: the tests that need no build: %0R s wall, %0U s user + %0S s system CPU"; \
	time $(PY) -m pytest -m "not built and $(TEST_MARKS)" --ignore=tests/executor; unbuilt=$$?; \
	echo "make test: the control plane's build:"; tail -n +1 -f --pid=$$first $(OUT)/test-build-first.log; \
	if ! wait $$first; then echo "make test: that build failed"; wait $$late; exit 1; fi; \
	echo "make test: the built tests that need no cluster, then the executor's, run beside the others ($(OUT)/test-built-apart.log)"; \
	( TIMEFORMAT="make test: the built tests that need no cluster: %0R s wall, %0U s user + %0S s system CPU"; \
	  time $(PY) -m pytest -p no:cacheprovider --basetemp=$(OUT)/pytest-apart -m "built and $(APART) and $(TEST_MARKS)"; \
	  built_apart=$$?; TIMEFORMAT="make test: the executor's tests: %0R s wall, %0U s user + %0S s system CPU"; \
	  time $(PY) -m pytest -p no:cacheprovider --basetemp=$(OUT)/pytest-executor -m "not built and $(TEST_MARKS)" tests/executor; \
	  exit $$(( built_apart || $$? )) ) > $(OUT)/test-built-apart.log 2>&1 & apart=$$!; \
	TIMEFORMAT="make test: the tests on the local clusters and Kafka: %0R s wall, %0U s user + %0S s system CPU"; \
	time $(PY) -m pytest -m "built and not ($(APART)) and $(TEST_MARKS)"; built=$$?; \
	wait $$apart; away=$$?; echo "make test: the built tests that need no cluster, then the executor's:"; cat $(OUT)/test-built-apart.log; \
	echo "make test: lint and the low-priority builds:"; tail -n +1 -f --pid=$$late $(OUT)/test-build-late.log; \
	if ! wait $$late; then echo "make test: lint or a build failed (above)"; exit 1; fi; \
	exit $$(( unbuilt || built || away ))

## test-loaded: find flakiness before users do. make test's built phase (the real control plane, executors,
## Kafka, S3, the real node) with a busy process on every core beside it (e2e/cpuhog), then the fault tests
## (FAULT_TESTS) LOADED_REPEAT more times under the same load. Takes about twice make test's built phase
## plus ~12.5 min a round (measured: 25 tests in 750 s); LOADED_PHASE=no runs only the rounds.
FAULT_TESTS := tests/integration/test_chaos.py tests/integration/test_operator.py \
  tests/integration/test_api_server_faults.py tests/integration/test_lost_tasks_restored.py \
  tests/integration/test_returning_member.py tests/integration/test_epoch_floor.py tests/processnode
LOADED_REPEAT ?= 3
LOADED_PHASE ?= yes
test-loaded: $(STAMP) system-packages k8s-binaries helm s3server promtool image node-binaries
	@if [ "$(LOADED_PHASE)" != no ]; then \
	  echo "make test-loaded: the built phase beside a busy process per core"; \
	  PYTHONPATH=e2e $(PY) -m cpuhog -- $(PY) -m pytest -m "built and $(TEST_MARKS)" || exit 1; \
	fi; \
	for round in $$(seq $(LOADED_REPEAT)); do \
	  echo "make test-loaded: the fault tests beside a busy process per core, round $$round of $(LOADED_REPEAT)"; \
	  PYTHONPATH=e2e $(PY) -m cpuhog -- $(PY) -m pytest -m "$(TEST_MARKS)" $(FAULT_TESTS) || exit 1; \
	done

## test-long: the rollout and the eviction of real executors (about 4-6 min each on a quiet machine; their
## short variants in make test: the kwok rollout on the real API server and the drain unit tests), and the
## full SIGKILL plan on the filesystem store (make test kills once at every point on the S3 store), and
## ten SIGTERMed leaders handing the Lease over (make test: three), the 2,000-task app on the API server (make test:
## 100,000 tasks scaled in onto one member), the capacity split on real executors (make test: the engine's quotas),
## a member without a claim restoring in full and a `delay` member restarting (make test: their rules as unit tests),
## two members whose JVM is stopped replaced one at a time (make test: the simulator's stuck-members and unit tests),
## and the 900-task headline scenario checked for double ownership (make test: every other scenario)
test-long: $(STAMP) k8s-binaries helm
	$(PY) -m pytest -m "long and not node"

## test-autoscaling: input lag scales real executors out and back in through Prometheus, KEDA and the
## controller-manager's HPA (tests/integration/test_autoscaling.py, marked autoscaling). Not in make test: it and
## the Prometheus and KEDA builds it needs cost ~15 min of the cold budget; make test keeps the HPA resolving /scale
## (tests/integration/test_kubectl.py), the exported input lag and the alerts checked by promtool
test-autoscaling: $(STAMP) k8s-binaries helm promtool prometheus keda
	$(PY) -m pytest tests/integration/test_autoscaling.py

## test-node: the real-node tier: a kubelet on containerd running the built image (root, runc; e2e/realnode).
## The chart and the shipped sample under restricted Pod Security with container kills (also in make test),
## plus the long ones
test-node: $(STAMP) k8s-binaries node-binaries helm image
	$(PY) -m pytest -m node

## kind-test: the real-node tier on a one-node kind cluster, for people with Docker and kind (e2e/kind/node-tests.sh:
## docker build, kind create with the volumes mount, kind load, pytest -m node, kind delete). Not run on our machines.
kind-test: $(STAMP) k8s-binaries helm
	bash e2e/kind/node-tests.sh

## test-demo: make demo's whole story as a test, in a short mode (about 4-6 min; kept out of make test's budget)
test-demo: $(STAMP) k8s-binaries helm
	$(PY) -m pytest -m demo

## unit: the tests that need no control plane, no image and no Kafka broker (Spark and the S3 server included)
unit: $(STAMP)
	$(PY) -m pytest -m "not integration and not image and not kafka"

## lint: ruff without its cache (a cached verdict misses an import whose module moved between source roots), then mypy strict
lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache operator tests e2e bench images
	$(VENV)/bin/ruff format --no-cache --check operator tests e2e bench images
	$(VENV)/bin/mypy

## bench: run the benchmarks (data plane, local stores, a member holding 50M keys, shared stores, Kafka, then engine and simulator) and rewrite bench/RESULTS.md
bench: $(STAMP)
	$(PY) bench/dataplane.py --write bench/results/dataplane.md
	$(PY) bench/localstores.py --write bench/results/localstores.md
	$(PY) bench/bigstate.py
	$(PY) bench/stores.py --write bench/results/stores.md
	PYTHONPATH=e2e $(PY) bench/kafkabench.py --write bench/results/kafka.md
	$(PY) bench/run.py --write bench/RESULTS.md

## bench-scale: object sizes, bytes written and plan()/reconcile CPU of one app at 1k, 10k and 100k tasks (not part of make test), writes bench/results/scale.md
bench-scale: $(STAMP)
	$(PY) bench/scale.py --write bench/results/scale.md

## bench-apiscale: one app of 100,000 tasks on 1,000 kwok members against the local control plane, the
## operator as a process and the executors' reports played on their schedule: its CPU, memory and the
## objects' sizes (about 30 min); writes bench/results/apiscale.md. Not part of make test.
bench-apiscale: $(STAMP) k8s-binaries
	@mkdir -p $(OUT)
	PYTHONPATH=e2e $(PY) bench/apiscale.py --out $(OUT) --write bench/results/apiscale.md $(BENCH_ARGS)

## bench-cluster: the rebalance scenarios on the local cluster with real executors, eager, cooperative and
## streamapp side by side, three runs (BENCH_RUNS), each recorded in bench/results/cluster-runs/ as it ends
## (a stopped series resumes with the runs it lacks; delete a run's file to run it again), then the
## simulator calibrated on the first run and checked against the others; writes bench/results/cluster.md
## and cluster-summary.json. A quick run takes 15-20 min on 2 cores. `--only PHASE` and `--protocol P`
## run part of it with a --write of its own, e.g. BENCH_ARGS='--only rolling-restart --protocol streamapp
## --write out/part/cluster.md'. Never part of make test.
BENCH_RUNS ?= 3
bench-cluster: $(STAMP) k8s-binaries helm
	@mkdir -p $(OUT)
	$(PY) bench/cluster.py --quick --runs $(BENCH_RUNS) --out $(OUT) $(BENCH_ARGS)

## bench-cluster-large: the same scenarios with large state (about 1.3M keys per task, LMDB), each app's store
## an S3 server in a network namespace behind a link shaped by tc, so a cold restore takes minutes (over twice
## a pod's start); three runs (BENCH_RUNS), about an hour each on 2 cores; root. Writes bench/results/cluster-large.md
## and the large rows of cluster-summary.json. Never part of make test.
bench-cluster-large: $(STAMP) k8s-binaries helm s3server
	@mkdir -p $(OUT)
	$(PY) bench/cluster.py --large --runs $(BENCH_RUNS) --out $(OUT) $(BENCH_ARGS)

## bench-cluster-report: bench/results/cluster.md, cluster-summary.json and the plots again from the
## recorded runs alone (no cluster)
bench-cluster-report: $(STAMP)
	$(PY) bench/cluster.py --report

## bench-autoscale: the operator's autoscaler against KEDA + HPA (the project's sample) on a 3x step, two
## compressed days and a spike, in the simulator, three runs each (about 2 min); records the raw runs in
## bench/results/autoscale-runs/ and writes autoscale-summary.json, autoscale.md and the plots from them
## (`$(PY) bench/autoscale.py --report` writes them again from the raw runs alone). Not part of make test.
bench-autoscale: $(STAMP)
	$(PY) bench/autoscale.py --runs $(BENCH_RUNS)

## bench-memory-limit: one member holding 1M and 50M keys (LMDB), each in a cgroup-v1 memory group of its
## own, with a limit of 1.5x the 1M-key member's footprint and without one, Zipf and uniform keys, three runs
## (BENCH_RUNS; about 35 min); root. Writes bench/results/memory-limit.json as each case ends and
## memory-limit.md (`$(PY) bench/memorylimit.py --from-raw` writes it again). Not part of make test.
bench-memory-limit: $(STAMP)
	$(PY) bench/memorylimit.py --runs $(BENCH_RUNS) $(BENCH_ARGS)

## bench-replay: a copy replaying an hour of a busy task's changelog from the real test S3 server behind a
## 20-ms round trip, one request at a time against read ahead, and a full restore instead; three runs (~20 min).
## Writes bench/results/replay.md and replay.json. Not part of make test.
bench-replay: $(STAMP) s3server
	$(PY) bench/replay.py --runs $(BENCH_RUNS) --write bench/results/replay.md

## chaos: the long chaos run (10 min of faults on real executors; STREAMAPP_CHAOS_SECONDS to change), writes bench/results/chaos.md
chaos: $(STAMP) k8s-binaries
	STREAMAPP_CHAOS=long $(PY) -m pytest tests/integration/test_chaos.py -q

## crds: regenerate the CRDs, install manifests, chart, docs/api.md and the monitoring objects from the resource models (a test checks they match)
crds: $(STAMP)
	$(VENV)/bin/streamapp crd --write crds
	$(VENV)/bin/streamapp manifests --write manifests
	$(VENV)/bin/streamapp chart --write charts/streamapp-operator
	$(VENV)/bin/streamapp api-docs --write docs
	$(VENV)/bin/streamapp monitoring --write manifests/monitoring

## k8s-binaries: build (once, cached in ~/.cache/streamapp/k8s/<version>) the control-plane binaries
k8s-binaries: $(STAMP)
	@$(TIMED) $(PY) e2e/cluster.py build

## node-binaries: build (once, cached in ~/.cache/streamapp/node/<versions>) the real node's kubelet, kube-proxy,
## containerd and CNI plugins
node-binaries: $(STAMP)
	@$(TIMED) $(PY) e2e/cluster.py build --real-node

## helm: build (once, cached in ~/.cache/streamapp/helm/<version>) the helm binary the chart tests use
helm: $(STAMP)
	@$(TIMED) PYTHONPATH=e2e $(PY) -m helmtool build

## s3server: build (once, cached in ~/.cache/streamapp/seaweedfs-s3/<version>) the SeaweedFS S3 server the S3 tests run on,
## trimmed to its `weed mini` (e2e/s3server/build.py)
s3server: $(STAMP)
	@$(TIMED) PYTHONPATH=e2e $(PY) -m s3server install

## promtool: build (once, cached in ~/.cache/streamapp/promtool/<version>) Prometheus's promtool, which checks and
## unit-tests the shipped alerts
promtool: $(STAMP)
	@$(TIMED) PYTHONPATH=e2e $(PY) -m promtool.install promtool

## prometheus: build (once, cached in ~/.cache/streamapp/prometheus/<version>) the Prometheus server the
## autoscaling test scrapes the operator with (after promtool, whose packages it reuses)
prometheus: promtool
	@$(TIMED) PYTHONPATH=e2e $(PY) -m promtool.install prometheus

## keda: build (once, cached in ~/.cache/streamapp/keda/<version>) KEDA's operator and metrics adapter, with only
## the Prometheus and CPU/memory scalers (e2e/kedatool/build.py), for the autoscaling test
keda: $(STAMP)
	@$(TIMED) PYTHONPATH=e2e $(PY) -m kedatool build

## dist: what a release publishes, into dist/: the chart archive (helm package), the wheel (a light base
## install; `executor` and `plots` extras) and the image as an OCI archive (built first when not current),
## with SHA256SUMS (e2e/dist.py; README "Install into a cluster")
dist: $(STAMP) system-packages helm
	@$(TIMED) $(PY) e2e/dist.py --out dist

## image: build the streamapp:<version> image with podman (base cached in ~/.cache/streamapp/image; no-op when current)
image: $(STAMP) system-packages
	@$(TIMED) $(PY) e2e/image.py build

## system-packages: the Debian packages the image build (podman, runc, mmdebstrap) and the Kafka test broker
## (maven resolves its jars; it brings a JRE) need, installed when missing (as root)
SYSTEM_PACKAGES := podman runc mmdebstrap maven
system-packages:
	@exec 9>"$${TMPDIR:-/tmp}/streamapp-system-packages.lock"; flock 9; \
	missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

cluster-up: $(STAMP) k8s-binaries
	$(PY) e2e/cluster.py up

cluster-down: $(STAMP)
	$(PY) e2e/cluster.py down
	$(PY) e2e/cluster.py down --real-node
	PYTHONPATH=e2e $(PY) -m s3server down
	PYTHONPATH=e2e $(PY) -m kafkabroker down

## kafka-up: start the test Kafka broker (KRaft, jars from Maven Central cached in ~/.cache/streamapp/kafka)
kafka-up: $(STAMP) system-packages
	PYTHONPATH=e2e $(PY) -m kafkabroker up

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .mypy_cache .ruff_cache .hypothesis
