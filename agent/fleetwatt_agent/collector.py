"""/metrics: a custom collector on a private registry that builds fresh metric families on each scrape
from a snapshot of the sampler's counters, so series of jobs that have gone (after --linger) simply
stop being exported; nothing module-level can keep a stale label set alive."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from fleetwatt_agent import __version__
from fleetwatt_agent.power_model import power_fit
from fleetwatt_agent.sampler import Snapshot

GPU = ["hostname", "gpu", "uuid"]
JOB_GPU = [*GPU, "job_key"]
MODEL = ["hostname", "gpu_model"]
INFO_LABELS = ["hostname", "job_key", "scheduler", "job_id", "user", "account", "namespace", "pod", "name"]


class AgentCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[Metric]:
        return []  # families vary per scrape: nothing to describe up front

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        host = snap.hostname

        gpu_energy = CounterMetricFamily(
            "fleetwatt_gpu_energy_joules", "Energy the GPU used while the agent watched", labels=GPU
        )
        gpu_idle = CounterMetricFamily(
            "fleetwatt_gpu_idle_energy_joules", "Part of it in samples with no job on the GPU", labels=GPU
        )
        gpu_power = GaugeMetricFamily("fleetwatt_gpu_power_watts", "Board power now", labels=GPU)
        gpu_mem = GaugeMetricFamily("fleetwatt_gpu_memory_used_bytes", "GPU memory used now", labels=GPU)
        gpu_limit = GaugeMetricFamily(
            "fleetwatt_gpu_power_limit_watts", "Power limit the driver enforces now (NVML's enforced limit)", labels=GPU
        )
        gpu_clock = GaugeMetricFamily("fleetwatt_gpu_sm_clock_hertz", "SM clock now", labels=GPU)
        gpu_resets = CounterMetricFamily(
            "fleetwatt_gpu_energy_counter_resets",
            "Times the driver's energy counter went backwards (driver reload); that interval was integrated from power",
            labels=GPU,
        )
        gpu_sampled = CounterMetricFamily(
            "fleetwatt_gpu_sampled_seconds",
            "Seconds of the GPU's time the agent sampled (extension: whether the agent saw the whole hour)",
            labels=GPU,
        )
        job_energy = CounterMetricFamily(
            "fleetwatt_job_energy_joules",
            "Energy given to the job on that GPU by that split method",
            labels=[*JOB_GPU, "method"],
        )
        job_sampled = CounterMetricFamily(
            "fleetwatt_job_sampled_seconds",
            "Seconds of the job's presence on that GPU that the agent sampled",
            labels=JOB_GPU,
        )
        job_sm = CounterMetricFamily(
            "fleetwatt_job_sm_seconds",
            "SM-busy seconds: sum of (SM utilisation / 100) x sample length",
            labels=JOB_GPU,
        )
        job_occ = CounterMetricFamily(
            "fleetwatt_job_occupancy_seconds",
            "Sum over samples with the job present of sample length / jobs present (extension: GPU-hours charged once)",
            labels=JOB_GPU,
        )
        job_last = GaugeMetricFamily(
            "fleetwatt_job_last_seen_time_seconds",
            "Unix time of the end of the last sample in which the job was present on that GPU (extension)",
            labels=JOB_GPU,
        )
        job_mem = GaugeMetricFamily("fleetwatt_job_gpu_memory_bytes", "GPU memory the job holds now", labels=JOB_GPU)
        for led in snap.gpus:
            gl = [host, str(led.info.index), led.info.uuid]
            gpu_energy.add_metric(gl, led.energy_j)
            gpu_idle.add_metric(gl, led.idle_j)
            gpu_power.add_metric(gl, led.power_w)
            gpu_mem.add_metric(gl, float(led.memory_used_bytes))
            if led.power_limit_w is not None:  # not supported: no series (the app reads it as unknown)
                gpu_limit.add_metric(gl, led.power_limit_w)
            if led.sm_clock_mhz is not None:
                gpu_clock.add_metric(gl, led.sm_clock_mhz * 1e6)
            gpu_resets.add_metric(gl, float(led.resets))
            gpu_sampled.add_metric(gl, led.sampled_s)
            for key, job in sorted(led.jobs.items()):
                jl = [*gl, key]
                for method, joules in sorted(job.energy_j.items()):
                    job_energy.add_metric([*jl, method], joules)
                job_sampled.add_metric(jl, job.sampled_s)
                job_sm.add_metric(jl, job.sm_s)
                job_occ.add_metric(jl, job.occupancy_s)
                job_last.add_metric(jl, job.last_seen)
                job_mem.add_metric(jl, float(job.memory_bytes))

        job_start = GaugeMetricFamily(
            "fleetwatt_job_start_time_seconds",
            "When the job started (scheduler record, else its oldest process's start), Unix seconds",
            labels=["hostname", "job_key"],
        )
        job_info = GaugeMetricFamily("fleetwatt_job_info", "Job metadata; empty where unknown", labels=INFO_LABELS)
        for key, info in sorted(snap.jobs.items()):
            if info.start_time is not None:
                job_start.add_metric([host, key], info.start_time)
            job_info.add_metric(
                [host, key, info.scheduler, info.job_id, info.user, info.account, info.namespace, info.pod, info.name],
                1.0,
            )

        agent_info = GaugeMetricFamily(
            "fleetwatt_agent_info",
            "What the agent can see on this node",
            labels=["hostname", "version", "backend", "process_utilization", "accounting_mode"],
        )
        agent_info.add_metric(
            [host, __version__, snap.info.backend, snap.info.process_utilization, snap.info.accounting_mode],
            1.0,
        )
        samples = CounterMetricFamily("fleetwatt_agent_samples", "Ticks done", labels=["hostname"])
        samples.add_metric([host], float(snap.samples_total))
        missed = CounterMetricFamily("fleetwatt_agent_missed_samples", "Ticks missed (overrun)", labels=["hostname"])
        missed.add_metric([host], float(snap.missed_total))

        # The power model of the sm_mem split, per GPU model (power_model.py), whatever --split says.
        pm_samples = GaugeMetricFamily(
            "fleetwatt_agent_power_model_samples",
            "Single-job samples the GPU model's power model is calibrated from",
            labels=MODEL,
        )
        pm_calibrated = GaugeMetricFamily(
            "fleetwatt_agent_power_model_calibrated",
            "1 when the GPU model's power model is calibrated (--split sm_mem then uses it), else 0",
            labels=MODEL,
        )
        pm_coefficient = GaugeMetricFamily(
            "fleetwatt_agent_power_model_coefficient",
            "The power model's fit so far, P = p0 + sm x sm% + mem x mem%: term p0 in W, sm and mem in W per "
            "percentage point",
            labels=[*MODEL, "term"],
        )
        pm_rms = GaugeMetricFamily(
            "fleetwatt_agent_power_model_rms_residual_watts",
            "Root mean square residual of the power model's fit over its samples",
            labels=MODEL,
        )
        for name, stats in sorted(snap.power_models.items()):
            ml = [host, name]
            fit = power_fit(stats)
            pm_samples.add_metric(ml, float(stats.n))
            pm_calibrated.add_metric(ml, 1.0 if fit is not None and fit.calibrated else 0.0)
            if fit is not None:
                pm_coefficient.add_metric([*ml, "p0"], fit.p0_w)
                pm_coefficient.add_metric([*ml, "sm"], fit.sm_w_per_pct)
                pm_coefficient.add_metric([*ml, "mem"], fit.mem_w_per_pct)
                pm_rms.add_metric(ml, fit.rms_w)

        yield from (
            gpu_energy,
            gpu_idle,
            gpu_power,
            gpu_mem,
            gpu_limit,
            gpu_clock,
            gpu_resets,
            gpu_sampled,
            job_energy,
            job_sampled,
            job_sm,
            job_occ,
            job_last,
            job_mem,
            job_start,
            job_info,
            agent_info,
            samples,
            missed,
            pm_samples,
            pm_calibrated,
            pm_coefficient,
            pm_rms,
        )


def make_registry(snapshot: Callable[[], Snapshot], process_metrics: bool = True) -> CollectorRegistry:
    """A private registry: the agent's collector, plus the standard process_* metrics (CPU, RSS) of
    the agent itself so that its own cost is visible in Prometheus."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentCollector(snapshot))
    if process_metrics:
        from prometheus_client import ProcessCollector

        ProcessCollector(registry=registry)
    return registry
