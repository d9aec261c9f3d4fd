"""The helm binary the chart tests use, built from Go modules like the control plane (see build.py)."""
