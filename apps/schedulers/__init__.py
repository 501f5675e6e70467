"""What the schedulers know about jobs that the agent cannot see (DESIGN section 8): state, exit code, the span the
job held its GPUs and the GPUs it asked for. `slurm` reads Slurm's accounting; no Django app config yet."""
