"""The fixed handful of PromQL queries the ingest runs per cluster-hour (pure string building).

Every query covers the whole cluster: their number does not grow with GPUs or jobs. Each is evaluated
as an instant query at the hour's end, so `[1h]` is the hour itself.
"""

from __future__ import annotations

from dataclasses import dataclass

# The agent's counters (DESIGN section 2, and the extensions in docs/metrics.md).
GPU_ENERGY = "fleetwatt_gpu_energy_joules_total"
GPU_IDLE_ENERGY = "fleetwatt_gpu_idle_energy_joules_total"
GPU_COUNTER_RESETS = "fleetwatt_gpu_energy_counter_resets_total"
GPU_SAMPLED = "fleetwatt_gpu_sampled_seconds_total"
JOB_ENERGY = "fleetwatt_job_energy_joules_total"
JOB_SAMPLED = "fleetwatt_job_sampled_seconds_total"
JOB_SM = "fleetwatt_job_sm_seconds_total"
JOB_OCCUPANCY = "fleetwatt_job_occupancy_seconds_total"
AGENT_SAMPLES = "fleetwatt_agent_samples_total"  # ticks per node: what an older agent's sampled time is read from
AGENT_COUNTERS = (
    GPU_ENERGY,
    GPU_IDLE_ENERGY,
    GPU_COUNTER_RESETS,
    GPU_SAMPLED,
    JOB_ENERGY,
    JOB_SAMPLED,
    JOB_SM,
    JOB_OCCUPANCY,
    AGENT_SAMPLES,
)
# The extensions of docs/metrics.md: an agent older than them exports none (the ingest falls back).
EXTENSIONS = (GPU_SAMPLED, JOB_OCCUPANCY, "fleetwatt_job_last_seen_time_seconds")

JOB_MEMORY = "fleetwatt_job_gpu_memory_bytes"
JOB_LAST_SEEN = "fleetwatt_job_last_seen_time_seconds"
JOB_START = "fleetwatt_job_start_time_seconds"
JOB_INFO = "fleetwatt_job_info"
AGENT_INFO = "fleetwatt_agent_info"

DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # millijoules, since the driver loaded
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB

# Labels by which dcgm-exporter ties a series to a job (Kubernetes pod mapping, HPC job mapping).
DCGM_JOB_LABELS = ("pod", "exported_pod", "hpc_job")

# Tag label that lets one HTTP query carry several aggregates of the same series.
TAG = "fw_q"


def selector(metric: str, cluster_selector: str, extra: str = "") -> str:
    matchers = ",".join(m for m in (cluster_selector.strip().strip("{}"), extra) if m)
    return f"{metric}{{{matchers}}}"


def _tagged(expr: str, tag: str) -> str:
    return f'label_replace({expr}, "{TAG}", "{tag}", "", "")'


def _tagged_union(parts: dict[str, str]) -> str:
    return " or ".join(_tagged(expr, tag) for tag, expr in parts.items())


@dataclass(frozen=True)
class HourQueries:
    """Builds the queries of one cluster; evaluate each at the hour's end."""

    cluster_selector: str
    scrape_interval_s: int
    lookback_s: int

    def counter_window(self, metric: str) -> str:
        """Last value, anchor (last value at or before the hour), minimum and resets, per series."""
        m = selector(metric, self.cluster_selector)
        return _tagged_union(
            {
                "last": f"last_over_time({m}[1h])",
                "anchor": f"last_over_time({m}[{self.lookback_s}s] offset 1h)",
                "min": f"min_over_time({m}[1h])",
                "resets": f"resets({m}[1h])",
            }
        )

    def raw_samples(self, metric: str, label: str, values: list[str]) -> str:
        """The hour's raw samples of the series whose `label` is one of `values` (resets only)."""
        pattern = "|".join(_regex_escape(v) for v in sorted(set(values)))
        matcher = label + '=~"' + pattern + '"'
        return selector(metric, self.cluster_selector, matcher) + "[1h]"

    def job_gauges(self) -> str:
        """Per job and GPU: peak memory and last-seen time; per job and host: start time."""
        return _tagged_union(
            {
                "memory": f"max_over_time({selector(JOB_MEMORY, self.cluster_selector)}[1h])",
                "last_seen": f"max_over_time({selector(JOB_LAST_SEEN, self.cluster_selector)}[1h])",
                "start": f"min_over_time({selector(JOB_START, self.cluster_selector)}[1h])",
            }
        )

    def job_info(self) -> str:
        """The jobs' metadata, and each agent's (its version): told apart by the `job_key` label."""
        return (
            f"last_over_time({selector(JOB_INFO, self.cluster_selector)}[1h]) or "
            f"last_over_time({selector(AGENT_INFO, self.cluster_selector)}[1h])"
        )

    def dcgm_series(self) -> str:
        """Per dcgm-exporter series: presence and signals of the series labelled with a job (pod or
        hpc_job), and the power integral of every series (the unlabelled ones are the GPU's idle time).

        First and last sample times need a subquery at the scrape step, the costliest query here, so
        they are asked only of job-labelled series, which only GPUs without an agent need."""
        step = f"{self.scrape_interval_s}s"
        power = selector(DCGM_POWER, self.cluster_selector)

        def each(template: str, metric: str) -> str:
            # timestamp() gives sample times only over a plain selector, so `or` goes outside.
            return " or ".join(template.format(s=s, step=step) for s in self._job_labelled_selectors(metric))

        return _tagged_union(
            {
                "power_sum": f"sum_over_time({power}[1h])",
                "samples": each("count_over_time({s}[1h])", DCGM_POWER),
                "first": each("min_over_time(timestamp({s})[1h:{step}])", DCGM_POWER),
                "last": each("max_over_time(timestamp({s})[1h:{step}])", DCGM_POWER),
                "util": each("avg_over_time({s}[1h])", DCGM_UTIL),
                "fb_avg": each("avg_over_time({s}[1h])", DCGM_FB_USED),
                "fb_max": each("max_over_time({s}[1h])", DCGM_FB_USED),
            }
        )

    def _job_labelled_selectors(self, metric: str) -> list[str]:
        return [selector(metric, self.cluster_selector, f'{label}!=""') for label in DCGM_JOB_LABELS]


def _regex_escape(value: str) -> str:
    special = set(r".^$*+?()[]{}|\\")
    return "".join("\\\\" + c if c in special else c for c in value).replace('"', '\\"')
