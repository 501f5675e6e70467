"""What the schedulers know about jobs that the agent cannot see (DESIGN section 8): state, exit code, the span the
job held its GPUs and the GPUs it asked for. `slurm` parses Slurm's accounting (pure), `sources` reads it (sacct or
slurmrestd), `services` stores it on jobs; apps.pipeline.scheduler runs the sync."""
