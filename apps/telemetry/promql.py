"""The fixed handful of PromQL queries the ingest runs per cluster-hour (pure string building).

Every query covers the whole cluster, or one shard of it: their number does not grow with GPUs or jobs.
Each is evaluated as an instant query at the hour's end, so `[1h]` is the hour itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apps.fleet.work_counters import WorkCounters

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
# The `method` label values of JOB_ENERGY this release knows (docs/metrics.md). A value outside them comes
# from a newer agent: the hour is refused with a message rather than stored under a name nothing reads.
AGENT_METHODS = frozenset({"whole_gpu", "gpu_time", "sm_time", "sm_mem", "busy_time", "memory"})
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

# The GPU's settings (docs/metrics.md, "Power limits and clocks"): gauges an older agent does not export.
GPU_POWER_LIMIT = "fleetwatt_gpu_power_limit_watts"  # NVML's enforced power limit
GPU_SM_CLOCK = "fleetwatt_gpu_sm_clock_hertz"

JOB_MEMORY = "fleetwatt_job_gpu_memory_bytes"
JOB_LAST_SEEN = "fleetwatt_job_last_seen_time_seconds"
JOB_START = "fleetwatt_job_start_time_seconds"
JOB_INFO = "fleetwatt_job_info"
AGENT_INFO = "fleetwatt_agent_info"

DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # millijoules, since the driver loaded
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
# Not in dcgm-exporter's default counters: a site adds them to its counters file. The enforced limit (all
# limiters applied) is read where exported, else the management limit; both W. The SM clock is in MHz.
DCGM_ENFORCED_POWER_LIMIT = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"
DCGM_POWER_MGMT_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
DCGM_SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"

# kube-state-metrics (apps.schedulers.kube): every pod it knows, and the GPUs a pod's containers request.
KSM_POD_INFO = "kube_pod_info"
KSM_POD_REQUESTS = "kube_pod_container_resource_requests"
KSM_GPU_REQUEST = 'resource="nvidia_com_gpu",unit="integer"'  # `nvidia.com/gpu` as kube-state-metrics writes it

# Labels by which dcgm-exporter ties a series to a job (Kubernetes pod mapping, HPC job mapping).
DCGM_JOB_LABELS = ("pod", "exported_pod", "hpc_job")

# Tag label that lets one HTTP query carry several aggregates of the same series.
TAG = "fw_q"
# Labels of the work query's answers (apps.telemetry.work): "<engine>/<kind>", and the model served.
WORK_TAG = "fw_w"
MODEL_TAG = "fw_model"

# Whether an engine's windows are open on the left, asked of it without data: at a whole second t, a
# subquery over the last 2 s at a 1 s step has 3 steps on Prometheus 2 (windows [t - d, t]) and 2 on
# VictoriaMetrics and Prometheus 3 (windows (t - d, t]). See HourQueries.windows_open_left.
WINDOW_PROBE = "count_over_time(vector(1)[2s:1s])"
WINDOW_PROBE_STEPS_CLOSED = 3


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
    # Prometheus 2 (and Thanos, Mimir 2) windows are [t - d, t]: a sample on the hour's start is in the
    # hour's aggregates, and a subquery's first step sits on it. VictoriaMetrics's are (t - d, t]; so that
    # both engines give the same rows, its windows are 1 ms longer, which makes them [t - d, t] for
    # samples stamped in milliseconds (docs/operations.md, "Engines").
    windows_open_left: bool = False
    # A shard's node matcher without its label (`=~"gpu-a.*"`, or `!~"..."` for the nodes no shard names): the
    # agent's series name their node in `hostname`, dcgm-exporter's in `Hostname` (apps.telemetry.shards).
    node_match: str = ""
    # The label naming a dcgm-exporter series' node (Cluster.dcgm_host_label): `Hostname`, `hostname` (4.8.3+),
    # or a relabelled `node`/`instance`; empty: dcgm-exporter's `Hostname`, the label a shard matches then.
    dcgm_host_label: str = ""
    # Whether the cluster's Prometheus holds kube-state-metrics (Cluster.scheduler_sources): then a pod that
    # dcgm-exporter's labels name is checked against the GPUs it requested (pod_gpu_claims).
    pod_claims: bool = False
    # The serving engines' and jobs' work counters read on this cluster (Cluster.work_counters; apps.telemetry.work).
    work: tuple[WorkCounters, ...] = ()

    def _sel(self, metric: str, extra: str = "") -> str:
        """The metric's selector: the cluster's matchers, the shard's node matcher, and `extra`."""
        node = ""
        if self.node_match:
            node = (
                (self.dcgm_host_label or "Hostname") if metric.startswith("DCGM_") else "hostname"
            ) + self.node_match
        return selector(metric, self.cluster_selector, ",".join(m for m in (node, extra) if m))

    def window(self, seconds: int) -> str:
        """A range of `seconds` that covers [t - seconds, t] on this engine."""
        return f"{seconds * 1000 + 1}ms" if self.windows_open_left else f"{seconds}s"

    @property
    def hour(self) -> str:
        return "1h" if not self.windows_open_left else self.window(3600)

    def counter_window(self, metric: str) -> str:
        """Last value, anchor (last value at or before the hour), minimum and resets, per series."""
        m = self._sel(metric)
        return _tagged_union(
            {
                "last": f"last_over_time({m}[{self.hour}])",
                "anchor": f"last_over_time({m}[{self.window(self.lookback_s)}] offset 1h)",
                "min": f"min_over_time({m}[{self.hour}])",
                "resets": f"resets({m}[{self.hour}])",
            }
        )

    def work_counters(self) -> str:
        """counter_window's aggregates of every work counter of every engine, the whole cluster in one query (work
        series name no GPU node: a sharded cluster asks it of its `rest` shard alone), each labelled with its
        engine and kind (WORK_TAG) and its model (MODEL_TAG, copied from the engine's model label)."""
        parts = []
        for counters in self.work:
            for kind, metric in counters.metrics().items():
                m = selector(metric, self.cluster_selector)
                for tag, expr in (
                    ("last", f"last_over_time({m}[{self.hour}])"),
                    ("anchor", f"last_over_time({m}[{self.window(self.lookback_s)}] offset 1h)"),
                    ("min", f"min_over_time({m}[{self.hour}])"),
                    ("resets", f"resets({m}[{self.hour}])"),
                ):
                    labelled = _tagged(f'label_replace({expr}, "{WORK_TAG}", "{counters.engine}/{kind}", "", "")', tag)
                    if counters.model_label:
                        labelled = f'label_replace({labelled}, "{MODEL_TAG}", "$1", "{counters.model_label}", "(.*)")'
                    parts.append(labelled)
        return " or ".join(parts)

    def work_metric(self, work_tag: str) -> str:
        """The counter name of a work series' "<engine>/<kind>" ("" : none configured)."""
        engine, _, kind = work_tag.partition("/")
        return next((c.metrics().get(kind, "") for c in self.work if c.engine == engine), "")

    def work_raw_samples(self, metric: str, label: str, values: list[str]) -> str:
        """The hour's raw samples of the work series whose `label` is one of `values` (resets only)."""
        pattern = "|".join(_regex_escape(v) for v in sorted(set(values)))
        return selector(metric, self.cluster_selector, label + '=~"' + pattern + '"') + f"[{self.hour}]"

    def raw_samples(self, metric: str, label: str, values: list[str]) -> str:
        """The hour's raw samples of the series whose `label` is one of `values` (resets only)."""
        pattern = "|".join(_regex_escape(v) for v in sorted(set(values)))
        matcher = label + '=~"' + pattern + '"'
        return self._sel(metric, matcher) + f"[{self.hour}]"

    def job_gauges(self) -> str:
        """Per job and GPU: peak memory and last-seen time; per job and host: start time; per GPU: its power limit
        (mean, least and most of the hour) and mean SM clock (apps.telemetry.gpu_settings)."""
        limit, clock = self._sel(GPU_POWER_LIMIT), self._sel(GPU_SM_CLOCK)
        return _tagged_union(
            {
                "memory": f"max_over_time({self._sel(JOB_MEMORY)}[{self.hour}])",
                "last_seen": f"max_over_time({self._sel(JOB_LAST_SEEN)}[{self.hour}])",
                "start": f"min_over_time({self._sel(JOB_START)}[{self.hour}])",
                **_settings_parts(limit=[limit], clock=clock, hour=self.hour),
            }
        )

    def job_info(self) -> str:
        """The jobs' metadata, and each agent's (its version): told apart by the `job_key` label."""
        return (
            f"last_over_time({self._sel(JOB_INFO)}[{self.hour}]) or "
            f"last_over_time({self._sel(AGENT_INFO)}[{self.hour}])"
        )

    def dcgm_series(self) -> str:
        """Per dcgm-exporter series: presence and signals of the series labelled with a job (pod or
        hpc_job), and the power integral of every series (the unlabelled ones are the GPU's idle time).

        First and last sample times need a subquery at the scrape step, the costliest query here, so
        they are asked only of job-labelled series, which only GPUs without an agent need."""
        step, hour = f"{self.scrape_interval_s}s", self.hour
        power = self._sel(DCGM_POWER)

        def each(template: str, metric: str) -> str:
            # timestamp() gives sample times only over a plain selector, so `or` goes outside.
            return " or ".join(template.format(s=s, hour=hour, step=step) for s in self._job_labelled_selectors(metric))

        return _tagged_union(
            {
                "power_sum": f"sum_over_time({power}[{hour}])",
                # Every GPU's framebuffer series, so that a GPU with no energy meter (a vGPU guest) is seen.
                "present": f"count_over_time({self._sel(DCGM_FB_USED)}[{hour}])",
                "samples": each("count_over_time({s}[{hour}])", DCGM_POWER),
                "first": each("min_over_time(timestamp({s})[{hour}:{step}])", DCGM_POWER),
                "last": each("max_over_time(timestamp({s})[{hour}:{step}])", DCGM_POWER),
                "util": each("avg_over_time({s}[{hour}])", DCGM_UTIL),
                "fb_avg": each("avg_over_time({s}[{hour}])", DCGM_FB_USED),
                "fb_max": each("max_over_time({s}[{hour}])", DCGM_FB_USED),
            }
        )

    def dcgm_settings(self) -> str:
        """dcgm-exporter's power limit and SM clock of every GPU series (apps.telemetry.gpu_settings): asked only
        of an hour some GPU of which the agent gave no settings for (an older agent, a GPU without one)."""
        return _tagged_union(
            _settings_parts(
                limit=[self._sel(DCGM_ENFORCED_POWER_LIMIT), self._sel(DCGM_POWER_MGMT_LIMIT)],
                clock=self._sel(DCGM_SM_CLOCK),
                hour=self.hour,
            )
        )

    def pod_gpu_claims(self) -> str:
        """kube-state-metrics' word on the hour's pods, whole cluster (its series name no GPU node): every pod it
        listed (`known`) and the most GPUs each requested (`gpus`), by namespace and pod, under either the
        pod's labels or their `exported_` names (a scrape without honor_labels)."""
        by = "namespace, pod, exported_namespace, exported_pod"
        info = selector(KSM_POD_INFO, self.cluster_selector)
        requests = selector(KSM_POD_REQUESTS, self.cluster_selector, KSM_GPU_REQUEST)
        return _tagged_union(
            {
                "known": f"max by ({by}) (max_over_time({info}[{self.hour}]))",
                "gpus": f"max by ({by}) (max_over_time({requests}[{self.hour}]))",
            }
        )

    def unmetered_signals(self, uuids: list[str]) -> str:
        """What is known of GPUs without an energy meter (asked only of them, rarely): per series (the GPU's
        own, or a job's) the mean utilisation, the mean and peak framebuffer used, and how many samples of it
        there were (the time the series was there)."""
        pattern = "|".join(_regex_escape(u) for u in sorted(set(uuids)))
        hour = self.hour

        def each(function: str, metric: str) -> str:
            # dcgm-exporter names the GPU `UUID`, or `uuid` in some releases: a series has one of them.
            selectors = [self._sel(metric, label + '=~"' + pattern + '"') for label in ("UUID", "uuid")]
            return " or ".join(f"{function}({s}[{hour}])" for s in selectors)

        return _tagged_union(
            {
                "util": each("avg_over_time", DCGM_UTIL),
                "fb_avg": each("avg_over_time", DCGM_FB_USED),
                "fb_max": each("max_over_time", DCGM_FB_USED),
                "samples": each("count_over_time", DCGM_FB_USED),
            }
        )

    def foreign_names(self) -> str:
        """The GPU metric names the hour holds (asked only when none the ingest reads answered)."""
        names = self._sel_any('__name__=~"(?i)(dcgm|nvidia)_.+"')
        return f"count by (__name__) (last_over_time({names}[{self.hour}]))"

    def _sel_any(self, matcher: str) -> str:
        matchers = ",".join(m for m in (self.cluster_selector.strip().strip("{}"), matcher) if m)
        return "{" + matchers + "}"

    def _job_labelled_selectors(self, metric: str) -> list[str]:
        return [self._sel(metric, f'{label}!=""') for label in DCGM_JOB_LABELS]


# The tags of a GPU's settings in the answers of job_gauges (the agent's) and dcgm_series (dcgm-exporter's).
SETTINGS_TAGS = ("power_limit", "power_limit_min", "power_limit_max", "sm_clock")


def _settings_parts(*, limit: list[str], clock: str, hour: str) -> dict[str, str]:
    """A GPU's power limit (mean, least, most over the hour) and mean SM clock: the first of the `limit` series
    that a GPU has (`or`: the answers of its series name no metric, so a GPU keeps the first)."""

    def first(function: str) -> str:
        return " or ".join(f"{function}({s}[{hour}])" for s in limit)

    return dict(
        zip(
            SETTINGS_TAGS,
            (first("avg_over_time"), first("min_over_time"), first("max_over_time"), f"avg_over_time({clock}[{hour}])"),
            strict=True,
        )
    )


def _regex_escape(value: str) -> str:
    """`value` as a regex that matches it alone, written as the inside of a PromQL string: each regex metacharacter
    escaped, then the regex's backslashes and quotes escaped for the string (a backslash in the value is 4 of them)."""
    special = set(r".^$*+?()[]{}|\\")
    regex = "".join("\\" + c if c in special else c for c in value)
    return regex.replace("\\", "\\\\").replace('"', '\\"')
