"""Job serializers: every quantity carries its unit in its name (DESIGN section 5)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.carbon.arithmetic import sci_kg
from apps.carbon.models import JobGroup
from apps.core.units.footprint import Footprint, kwh
from apps.core.units.money import money_text
from apps.core.web.serializers import PlannedRepresentationMixin
from apps.fleet.models import Cluster, Team
from apps.jobs.methods import METHODS
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.jobs.per_token import per_token
from apps.jobs.selectors import job_work_units, serving_jobs
from apps.jobs.states import STATE_CHOICES, exit_text, state_help

from .work_serializers import PerTokenSerializer, per_token_row

PERIOD_FIELDS = (
    "period_gpu_hours", "period_energy_kwh", "period_facility_kwh", "period_co2e_kg", "period_cost",
    "period_cost_exact",
)  # fmt: skip
EMPTY = Footprint(operational_kg=0.0)
MILLIONTH = Decimal("0.000001")


class JobSerializer(PlannedRepresentationMixin, serializers.ModelSerializer):
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="Cluster name."
    )
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="Team the job is charged to."
    )
    gpu_hours = serializers.FloatField(help_text="GPU-hours occupied, shared with jobs present at the same time (h).")
    energy_j = serializers.FloatField(help_text="GPU energy measured for the job (J).")
    energy_low_j = serializers.FloatField(
        allow_null=True,
        help_text="Low end of energy_j's interval where part of it was split on a shared GPU: the split method's "
        "error measured on the H200 (at least 90 % of measurements inside; docs/accuracy.md, 'Error bars') and the "
        "hours' sampling (J). Null where every joule is exact (one job on its GPUs) or estimated.",
    )
    energy_high_j = serializers.FloatField(allow_null=True, help_text="High end of energy_j's interval (J).")
    server_kwh = serializers.FloatField(help_text="GPU energy x the server type's node overhead (kWh).")
    facility_kwh = serializers.FloatField(help_text="Server energy x the site's PUE for each hour's month (kWh).")
    attribution = serializers.CharField(help_text="Dominant split method: " + ", ".join(METHODS) + ".")
    attribution_j = serializers.DictField(child=serializers.FloatField(), help_text="Joules per split method (J).")
    coverage = serializers.FloatField(help_text="Sampled GPU-seconds / expected GPU-seconds (0..1).")
    operational_kg = serializers.FloatField(
        allow_null=True, help_text="Each hour's facility kWh x that hour's grid intensity (kg CO2e); null: no zone."
    )
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e of the GPU-hours occupied (kg).")
    sci_kg = serializers.SerializerMethodField(help_text="(operational + embodied) per functional unit (kg).")
    functional_unit = serializers.SerializerMethodField(help_text='"run", or the work unit the job reported.')
    energy_kwh = serializers.SerializerMethodField(help_text="GPU energy measured for the job (kWh).")
    cost = serializers.SerializerMethodField(
        help_text="GPU-hours x rate + facility kWh x price, in `currency`, rounded half-even to its minor unit "
        "(2 places for EUR and USD, 0 for JPY): a team's rollup `cost` is the sum of these (docs/api.md)."
    )
    cost_exact = serializers.DecimalField(
        source="cost", max_digits=16, decimal_places=6, help_text="The cost before rounding (6 places)."
    )
    currency = serializers.CharField(help_text="ISO 4217 currency of `cost` (the site's).")
    intensity_basis = serializers.CharField(help_text="location, market or marginal.")
    intensity_source = serializers.CharField(help_text="Where the hourly intensity came from.")
    intensity_estimated = serializers.BooleanField(help_text="Some hours had no intensity and were filled in.")
    job_group: serializers.SlugRelatedField[JobGroup] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True, help_text="Campaign or model."
    )
    shift_saving_kg = serializers.FloatField(
        allow_null=True, help_text="Hint: CO2e the cleanest window within the deadline would have saved (kg)."
    )
    flags = serializers.ListField(child=serializers.CharField(), help_text="Kinds of open flags on the job.")
    # The scheduler's record (DESIGN section 8): empty or null where no record describes the job.
    state = serializers.ChoiceField(choices=STATE_CHOICES, help_text="The scheduler's last word on it: " + state_help())
    exit_code = serializers.IntegerField(
        allow_null=True,
        help_text="Exit status of its script (0..255); null: killed by a signal, unknown, or not ended.",
    )
    signal = serializers.IntegerField(
        allow_null=True, help_text="Number of the signal that ended it (e.g. 9: SIGKILL); 0: none; null: unknown."
    )
    tdp_estimate_j = serializers.FloatField(
        allow_null=True,
        help_text="What a TDP-based tool would claim: GPU-seconds held x the GPU model's TDP (J), beside the "
        "measured energy_j (docs/arithmetic.md). Null where a GPU's model has no TDP in the fleet config.",
    )
    exit_text = serializers.SerializerMethodField(
        help_text="How it ended, in words, from its state, exit code and signal: Slurm's out-of-memory (0:125), "
        "time limit, node failure and preemption read as what happened, not as a signal or exit code."
    )
    partition = serializers.CharField(help_text="Scheduler partition it ran in; empty: no scheduler record.")
    qos = serializers.CharField(help_text="Scheduler quality of service; empty: no scheduler record.")
    display_id = serializers.CharField(
        help_text="The scheduler's name for it, as squeue shows it: 6_2 for task 2 of array 6, 10+1 for a "
        "heterogeneous job's component; empty: no scheduler record."
    )
    gpus_requested = serializers.IntegerField(
        allow_null=True, help_text="GPUs it asked its scheduler for (count); null: no scheduler record."
    )
    gpus_allocated = serializers.IntegerField(
        allow_null=True, help_text="GPUs its scheduler gave it (count); null: no scheduler record."
    )

    excluded_from_bill = serializers.BooleanField(
        help_text="An admin took it off its team's bill: its cost is in no rollup, FOCUS file or report."
    )
    # The part inside the period asked for (`?start=` and/or `?end=`), beside the whole run's figures above; null
    # where no period is asked for. A team's `period_cost` added up over its jobs on the bill is its rollup's cost.
    period_gpu_hours = serializers.SerializerMethodField(help_text="GPU-hours occupied inside the period (h).")
    period_energy_kwh = serializers.SerializerMethodField(help_text="GPU energy inside the period (kWh).")
    period_facility_kwh = serializers.SerializerMethodField(help_text="Facility energy inside the period (kWh).")
    period_co2e_kg = serializers.SerializerMethodField(
        help_text="Operational + embodied CO2e inside the period (kg); operational 0 where no zone."
    )
    period_cost = serializers.SerializerMethodField(
        help_text="Cost inside the period, rounded half-even to the currency's minor unit: the team's bill for the "
        "period is the sum of these over its jobs on the bill (docs/api.md)."
    )
    period_cost_exact = serializers.SerializerMethodField(help_text="Cost inside the period, unrounded (6 places).")

    class Meta:
        model = Job
        fields = [
            "id", "cluster", "job_key", "scheduler", "job_id", "user", "account", "namespace", "pod", "name",
            "team", "job_group", "source", "start", "end", "last_seen", "gpu_count", "gpu_hours", "energy_j",
            "server_kwh", "facility_kwh", "attribution", "attribution_j", "coverage", "sampled_s", "expected_s",
            "sm_s", "peak_memory_bytes", "operational_kg", "embodied_kg", "sci_kg", "functional_unit", "cost",
            "cost_exact", "energy_kwh", "currency", "intensity_basis", "intensity_source", "intensity_estimated",
            "shift_saving_kg", "flags", "state", "exit_code", "signal", "partition", "qos", "display_id",
            "gpus_requested", "gpus_allocated",
            # Added later, last: a CSV read by column position reads what it read before.
            "exit_text", "tdp_estimate_j", "energy_low_j", "energy_high_j", "excluded_from_bill", "period_gpu_hours",
            "period_energy_kwh", "period_facility_kwh", "period_co2e_kg", "period_cost", "period_cost_exact",
        ]  # fmt: skip
        read_only_fields = fields

    # The list reads its page as values() rows; these are the columns its method fields read.
    row_method_columns = {
        "energy_kwh": ("energy_j",),
        "cost": ("cost", "currency"),
        "sci_kg": ("operational_kg", "embodied_kg", "work_units"),
        "functional_unit": ("work_unit", "work_units"),
        "exit_text": ("state", "exit_code", "signal"),
        **{name: ("id", "currency") for name in PERIOD_FIELDS},
    }

    def _in_period(self, job: Job) -> Footprint | None:
        """The job's part inside the period (the view's one query per page: context `in_period`, a job with
        nothing there an empty footprint); None where no period was asked for."""
        figures: dict[int, Footprint] | None = self.context.get("in_period")
        if figures is None:
            return None
        return figures.get(job.id, EMPTY)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_period_gpu_hours(self, job: Job) -> float | None:
        part = self._in_period(job)
        return None if part is None else part.gpu_hours

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_period_energy_kwh(self, job: Job) -> float | None:
        part = self._in_period(job)
        return None if part is None else part.gpu_kwh

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_period_facility_kwh(self, job: Job) -> float | None:
        part = self._in_period(job)
        return None if part is None else part.facility_kwh

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_period_co2e_kg(self, job: Job) -> float | None:
        part = self._in_period(job)
        return None if part is None else part.co2e_kg

    @extend_schema_field(serializers.DecimalField(max_digits=16, decimal_places=3, allow_null=True))
    def get_period_cost(self, job: Job) -> str | None:
        part = self._in_period(job)
        return None if part is None else money_text(part.cost, job.currency)

    @extend_schema_field(serializers.DecimalField(max_digits=16, decimal_places=6, allow_null=True))
    def get_period_cost_exact(self, job: Job) -> str | None:
        part = self._in_period(job)
        return None if part is None else str(Decimal(part.cost).quantize(MILLIONTH))

    @extend_schema_field(serializers.FloatField())
    def get_energy_kwh(self, job: Job) -> float:
        return kwh(job.energy_j)

    @extend_schema_field(serializers.DecimalField(max_digits=16, decimal_places=3))
    def get_cost(self, job: Job) -> str:
        return money_text(job.cost, job.currency)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_sci_kg(self, job: Job) -> float | None:
        return sci_kg(operational_kg=job.operational_kg, embodied_kg=job.embodied_kg, work_units=job.work_units)

    @extend_schema_field(serializers.CharField())
    def get_functional_unit(self, job: Job) -> str:
        return job.work_unit if job.work_units else "run"

    @extend_schema_field(serializers.CharField())
    def get_exit_text(self, job: Job) -> str:
        return exit_text(job.state, job.exit_code, job.signal)


class JobGpuHourSerializer(serializers.ModelSerializer):
    gpu_uuid = serializers.CharField(source="gpu.uuid", help_text="GPU UUID.")
    hostname = serializers.CharField(source="gpu.node.hostname")
    gpu_index = serializers.IntegerField(source="gpu.index")
    attribution_j = serializers.SerializerMethodField(help_text="Joules per split method in this GPU-hour (J).")

    class Meta:
        model = JobGpuHour
        fields = [
            "hour",
            "gpu_uuid",
            "hostname",
            "gpu_index",
            "source",
            "energy_j",
            "attribution_j",
            "sampled_s",
            "sm_s",
            "occupancy_s",
            "peak_memory_bytes",
            "first_seen",
            "last_seen",
        ]

    @extend_schema_field(serializers.DictField(child=serializers.FloatField()))
    def get_attribution_j(self, row: JobGpuHour) -> dict[str, float]:
        energy: dict[tuple[int, Any], dict[str, float]] = self.context.get("energy", {})
        return energy.get((row.gpu_id, row.hour), {})


class JobDetailSerializer(JobSerializer):
    hours = serializers.SerializerMethodField(help_text="Per GPU and hour: energy by method, sampling, memory.")
    gpus = serializers.SerializerMethodField(help_text="Per GPU: energy, sampled seconds and coverage.")
    served = serializers.SerializerMethodField(
        help_text="Per model its serving engine named: the tokens and requests counted over the whole run, with the "
        "job's energy, CO2e and cost per token (docs/arithmetic.md, 'Per token served'). Empty: it served nothing."
    )
    counted_units = serializers.SerializerMethodField(
        help_text="Units its own work counter counted over the whole run, per unit (fleetwatt_job_work_units_total; "
        "docs/metrics.md, 'Work counters'). Empty: it exports none."
    )

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "gpus", "hours", "served", "counted_units"]
        read_only_fields = fields

    @extend_schema_field(PerTokenSerializer(many=True))
    def get_served(self, job: Job) -> list[dict[str, Any]]:
        served = serving_jobs(jobs=Job.objects.filter(pk=job.pk), start=None, end=None)
        return [per_token_row(g, group_by="model") for g in per_token(served, group_by="model")]

    @extend_schema_field(serializers.DictField(child=serializers.FloatField()))
    def get_counted_units(self, job: Job) -> dict[str, float]:
        return job_work_units(job=job)

    def _energy(self, job: Job) -> dict[tuple[int, Any], dict[str, float]]:
        energy: dict[tuple[int, Any], dict[str, float]] = {}
        for row in JobGpuHourEnergy.objects.filter(job=job).order_by("hour", "gpu_id", "method"):
            energy.setdefault((row.gpu_id, row.hour), {})[row.method] = row.energy_j
        return energy

    @extend_schema_field(JobGpuHourSerializer(many=True))
    def get_hours(self, job: Job) -> list[dict[str, Any]]:
        rows = JobGpuHour.objects.filter(job=job).select_related("gpu__node").order_by("hour", "gpu__index")
        return JobGpuHourSerializer(rows, many=True, context={"energy": self._energy(job)}).data  # type: ignore[return-value]

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_gpus(self, job: Job) -> list[dict[str, Any]]:
        per_gpu: dict[str, dict[str, Any]] = {}
        for row in JobGpuHour.objects.filter(job=job).select_related("gpu__node"):
            g = per_gpu.setdefault(
                row.gpu.uuid,
                {
                    "gpu_uuid": row.gpu.uuid,
                    "hostname": row.gpu.node.hostname,
                    "gpu_index": row.gpu.index,
                    "energy_j": 0.0,
                    "sampled_s": 0.0,
                    "occupancy_s": 0.0,
                    "peak_memory_bytes": 0,
                },
            )
            g["energy_j"] += row.energy_j
            g["sampled_s"] += row.sampled_s
            g["occupancy_s"] += row.occupancy_s
            g["peak_memory_bytes"] = max(g["peak_memory_bytes"], row.peak_memory_bytes)
        return sorted(per_gpu.values(), key=lambda g: (g["hostname"], g["gpu_index"]))


class WorkSerializer(serializers.Serializer):
    work_units = serializers.FloatField(min_value=1e-9, max_value=1e18, help_text="How many units of work the run did.")
    work_unit = serializers.RegexField(
        r"\A[a-z0-9_]{1,30}\Z",
        trim_whitespace=False,  # "req\n" is refused, not stored as "req"
        help_text='The unit, e.g. "1k_tokens" or "request" (lower case, digits, _).',
    )
