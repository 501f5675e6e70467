"""fleetwatt-agent: per-job energy on shared GPUs, exported to Prometheus (DESIGN.md section 2)."""

__version__ = "0.1.0"
