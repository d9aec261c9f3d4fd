"""A node whose pods run as plain local processes (no images, no isolation).

The agent registers a Node, keeps it Ready (status + Lease heartbeats), and for every pod bound to it
starts each container's command/args/env as a local process, probes readiness, restarts per
``restartPolicy``, stops processes on deletion (SIGTERM, then SIGKILL after the grace period) and
reports it all in the pod's status, like a kubelet would.
"""
