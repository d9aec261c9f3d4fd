"""Sample pipelines: `counts` (keyed running counts) and `windowed` (per-key tumbling-window sums)."""
