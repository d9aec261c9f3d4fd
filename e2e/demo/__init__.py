"""`make demo`: the real operator at work on the local control plane, watched live from the outside.

`driver` runs the story (install with the Helm chart, a count app with real PySpark executors, input
at a fixed rate, scale-out, an executor killed and back); `commits` follows the commit manifests;
`view` renders the live table; `downtime` and `timeline` turn what was seen into the final figures.
"""
