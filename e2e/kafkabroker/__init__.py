"""A real Apache Kafka broker (KRaft, one node acting as broker and controller) for tests and the demo.

The jars come from Maven Central (`jars`), pinned by `pom.xml` and cached under
``~/.cache/streamapp/kafka/<version>/``; the broker runs as a plain ``java`` process on 127.0.0.1
(`broker`) with its state under ``$STREAMAPP_CLUSTER_DIR/kafka`` so ``make cluster-down`` stops it too.
"""
