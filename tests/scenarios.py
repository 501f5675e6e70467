"""Test fleets with known answers."""

from __future__ import annotations

from typing import Any

START = "2026-11-02T00:00:00Z"


def spine_scenario(*, scrape_offset_s: float = 0.0, scrape_interval_s: int = 15) -> dict[str, Any]:
    """Six hours of a small fleet with every case the ingest must get exactly right."""
    return {
        "name": "spine",
        "start": START,
        "duration": "6h",
        "scrape_interval_s": scrape_interval_s,
        "scrape_offset_s": scrape_offset_s,
        "linger_s": 120,
        "nodes": [
            {"hostname": "slurm-a", "gpus": 4},
            {"hostname": "slurm-b", "gpus": 2},
            {"hostname": "k8s-dcgm", "gpus": 2, "agent": False, "dcgm_pod_labels": True, "dcgm_pod_values": "own"},
        ],
        "jobs": [
            # Starts and ends inside hours, over two GPUs, with a changing profile.
            {
                "scheduler": "slurm",
                "job_id": "101",
                "user": "ada",
                "account": "vision",
                "node": "slurm-a",
                "gpus": [0, 1],
                "start": "17m23s",
                "end": "3h41m7s",
                "sm": [[0, 92], ["1h", 70]],
                "power_w": [[0, 640], ["1h", 520]],
                "memory_gib": 60,
                "name": "train-vit",
            },
            # A hog beside a busy job on one GPU (the seed measurement's case).
            {
                "scheduler": "slurm",
                "job_id": "102",
                "user": "bob",
                "account": "nlp",
                "node": "slurm-a",
                "gpus": [2],
                "start": "5m",
                "end": "5h",
                "sm": 97,
                "power_w": 690,
                "memory_gib": 1,
                "name": "heavy",
            },
            {
                "scheduler": "slurm",
                "job_id": "103",
                "user": "cy",
                "account": "nlp",
                "node": "slurm-a",
                "gpus": [2],
                "start": "31m",
                "end": "4h2m",
                "sm": [[0, 0], ["20m", 1]],
                "power_w": 90,
                "memory_gib": 10,
                "name": "light",
            },
            # A short job of a few minutes.
            {
                "scheduler": "slurm",
                "job_id": "104",
                "user": "ada",
                "account": "vision",
                "node": "slurm-a",
                "gpus": [3],
                "start": "2h58m10s",
                "end": "3h3m40s",
                "sm": 80,
                "power_w": 500,
                "memory_gib": 5,
            },
            # An agent outage (restart) in the middle of this one: coverage under 0.95.
            {
                "scheduler": "slurm",
                "job_id": "105",
                "user": "dee",
                "account": "bio",
                "node": "slurm-b",
                "gpus": [0],
                "start": "10m",
                "end": "3h",
                "sm": 60,
                "power_w": 450,
                "memory_gib": 30,
            },
            # Spans the driver counter reset on slurm-b GPU 1, and the scrape gap.
            {
                "scheduler": "slurm",
                "job_id": "106",
                "user": "dee",
                "account": "bio",
                "node": "slurm-b",
                "gpus": [1],
                "start": "3h30m",
                "end": "5h50m",
                "sm": 75,
                "power_w": 550,
                "memory_gib": 20,
            },
            # Plain process, no scheduler.
            {
                "scheduler": "proc",
                "job_id": "4242-1793580000",
                "user": "root",
                "node": "slurm-b",
                "gpus": [1],
                "start": "20m",
                "end": "1h10m",
                "sm": 40,
                "power_w": 300,
                "memory_gib": 2,
            },
            # dcgm-exporter only: two pods sharing GPU 0 (own utilisation), one alone on GPU 1.
            {
                "scheduler": "k8s",
                "namespace": "search",
                "pod": "ranker-0",
                "node": "k8s-dcgm",
                "gpus": [0],
                "start": "1h",
                "end": "4h",
                "sm": 70,
                "power_w": 600,
                "memory_gib": 40,
            },
            {
                "scheduler": "k8s",
                "namespace": "search",
                "pod": "embed-0",
                "node": "k8s-dcgm",
                "gpus": [0],
                "start": "1h",
                "end": "4h",
                "sm": 20,
                "power_w": 300,
                "memory_gib": 10,
            },
            {
                "scheduler": "k8s",
                "namespace": "ads",
                "pod": "trainer-0",
                "node": "k8s-dcgm",
                "gpus": [1],
                "start": "2h",
                "end": "5h",
                "sm": 90,
                "power_w": 650,
                "memory_gib": 70,
            },
        ],
        "faults": [
            {"kind": "agent_down", "node": "slurm-b", "start": "1h20m", "end": "1h35m"},
            {"kind": "counter_reset", "node": "slurm-b", "gpu": 1, "at": "4h12m"},
            {"kind": "scrape_gap", "node": "slurm-b", "start": "4h40m", "end": "4h52m"},
        ],
    }
