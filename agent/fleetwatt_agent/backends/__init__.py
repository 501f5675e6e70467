"""Backends read the GPUs once a tick: NVML (NVIDIA), DRM fdinfo + hwmon (AMD, Intel), replay."""
