"""The fleet: clusters (one Prometheus-compatible endpoint each), nodes, GPUs, teams and their rules."""

from __future__ import annotations

from typing import TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from apps.core.access.policy import member_team_ids, user_sees_all_teams
from apps.core.units.glossary import gpu_name

from .endpoint import EndpointSettings, env_name_problem, headers_problems, label_name_problem
from .work_counters import WorkCounters, work_counters_from_json, work_counters_parse

_Q = TypeVar("_Q", bound=models.QuerySet)


class Cluster(models.Model):
    """A set of series in one Prometheus-compatible endpoint, selected by an optional label matcher, and
    optionally its scheduler's accounting (docs/schedulers.md, "Configuring a cluster's accounting")."""

    class Scheduler(models.TextChoices):
        NONE = "", "none"
        SLURM_SACCT = "slurm_sacct", "Slurm: sacct"
        SLURM_REST = "slurm_rest", "Slurm: slurmrestd"
        KUBERNETES = "kube_state_metrics", "Kubernetes: kube-state-metrics"

    name = models.SlugField(max_length=100, unique=True)
    prometheus_url = models.URLField(help_text="Query endpoint, e.g. http://prometheus:9090")
    # How the endpoint is reached (apps.fleet.endpoint; docs/config.md): secrets by the NAME of the
    # worker's environment variable that holds them, never in clear.
    prometheus_bearer_token_env = models.CharField(
        max_length=100,
        blank=True,
        default="",
        db_default="",
        help_text="NAME of the worker's environment variable holding a bearer token (never the token).",
    )
    prometheus_basic_auth_user = models.CharField(
        max_length=100, blank=True, default="", db_default="", help_text="Basic auth user name; empty: no basic auth."
    )
    prometheus_basic_auth_password_env = models.CharField(
        max_length=100,
        blank=True,
        default="",
        db_default="",
        help_text="NAME of the worker's environment variable holding the basic auth password (never the password).",
    )
    prometheus_headers = models.JSONField(
        default=dict,
        blank=True,
        db_default={},
        help_text='Extra headers, e.g. {"X-Scope-OrgID": "tenant-a"}; a value "${NAME}" is read from the '
        "environment variable NAME (required for secrets).",
    )
    prometheus_ca_file = models.CharField(
        max_length=500,
        blank=True,
        default="",
        db_default="",
        help_text="Path on the worker of a CA bundle (PEM) to verify the endpoint's certificate; empty: the system's.",
    )
    prometheus_timeout_s = models.FloatField(
        null=True, blank=True, help_text="Seconds per query; empty: FLEETWATT_PROMETHEUS_TIMEOUT_S."
    )
    selector = models.CharField(
        max_length=500,
        blank=True,
        help_text='Label matchers added to every query, e.g. cluster="a" (without braces).',
    )
    scrape_interval_s = models.PositiveIntegerField(
        default=15, help_text="Scrape interval of the agent and dcgm-exporter jobs, in seconds."
    )
    dcgm_host_label = models.CharField(
        max_length=100,
        blank=True,
        default="",
        db_default="",
        help_text="Label naming the node on dcgm-exporter's series: Hostname, hostname (dcgm-exporter 4.8.3+), or a "
        "relabelled node or instance. Empty: Hostname or hostname (a sharded cluster's node matchers use Hostname).",
    )
    work_counters = models.JSONField(
        null=True,
        blank=True,
        help_text="The serving engines' and jobs' work counters read (docs/config.md, work_counters): a list of "
        '{"engine", "output_tokens", "prompt_tokens", "requests", "units", "model_label"}. Empty: the defaults '
        "(vLLM, TGI, SGLang, Triton, fleetwatt_job_work_units_total); []: none.",
    )
    site = models.ForeignKey(
        "carbon.Site",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="clusters",
        help_text="Where it runs: grid zone, PUE, electricity price. Empty: no carbon or energy cost.",
    )
    source_retention_s = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="How long its endpoint keeps samples, as it last said (empty: unknown)."
    )
    scheduler = models.CharField(
        max_length=20,
        choices=Scheduler.choices,
        blank=True,
        default=Scheduler.NONE,
        db_default=Scheduler.NONE,
        help_text="Where its jobs' accounting is read: states, exit codes, allocations. Empty: not read.",
    )
    kube_pods = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Also read Kubernetes pods from kube-state-metrics in this cluster's Prometheus (Slurm and "
        "Kubernetes side by side on one cluster).",
    )
    sacct_command = models.CharField(
        max_length=500,
        default="sacct",
        db_default="sacct",
        help_text="sacct as the worker runs it (a path, or a command and its arguments; no shell). "
        "The worker's environment is passed on, e.g. SLURM_CONF.",
    )
    slurmrest_url = models.URLField(
        blank=True, db_default="", help_text="slurmrestd's base URL, e.g. http://slurm-ctl:6820"
    )
    slurmrest_token_env = models.CharField(
        max_length=100,
        blank=True,
        db_default="",
        help_text="NAME of the worker's environment variable that holds slurmrestd's JWT (never the token).",
    )
    slurmrest_user = models.CharField(
        max_length=100, blank=True, db_default="", help_text="X-SLURM-USER-NAME sent to slurmrestd; empty: not sent."
    )
    scheduler_synced_through = models.DateTimeField(
        null=True, blank=True, help_text="The scheduler's accounting has been read up to here."
    )
    scheduler_status = models.TextField(
        blank=True, db_default="", help_text="The last sync's error; empty when it went well."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for name, example in (
            ("prometheus_bearer_token_env", "PROM_TOKEN"),
            ("prometheus_basic_auth_password_env", "PROM_PASSWORD"),
        ):
            value = getattr(self, name)
            if value and (problem := env_name_problem(value, example=example)):
                errors[name] = problem
        if problems := headers_problems(self.prometheus_headers):
            errors["prometheus_headers"] = "; ".join(problems)
        if self.dcgm_host_label and (problem := label_name_problem(self.dcgm_host_label)):
            errors["dcgm_host_label"] = problem
        if self.prometheus_bearer_token_env and self.prometheus_basic_auth_user:
            errors["prometheus_basic_auth_user"] = "give a bearer token or basic auth, not both"
        if self.prometheus_timeout_s is not None and not 0 < self.prometheus_timeout_s <= 600:
            errors["prometheus_timeout_s"] = "over 0 and at most 600 seconds"
        if problems := work_counters_parse(self.work_counters, "work_counters")[1]:
            errors["work_counters"] = "; ".join(problems)
        if errors:
            raise ValidationError(errors)

    def endpoint_settings(self) -> EndpointSettings:
        """How its endpoint is reached, as stored (the secrets' variable names, not their values)."""
        return EndpointSettings(
            cluster=self.name,
            url=self.prometheus_url,
            bearer_token_env=self.prometheus_bearer_token_env,
            basic_auth_user=self.prometheus_basic_auth_user,
            basic_auth_password_env=self.prometheus_basic_auth_password_env,
            headers=dict(self.prometheus_headers or {}),
            ca_file=self.prometheus_ca_file,
            timeout_s=self.prometheus_timeout_s,
        )

    def work_counters_read(self) -> tuple[WorkCounters, ...]:
        """The work counters the ingest reads on it (apps.fleet.work_counters): its own, else the defaults."""
        return work_counters_from_json(self.work_counters)

    def scheduler_sources(self) -> list[str]:
        """Where its jobs' records are read: its scheduler, and kube-state-metrics' pods where asked for."""
        sources = [self.scheduler] if self.scheduler else []
        if self.kube_pods and self.scheduler != self.Scheduler.KUBERNETES:
            sources.append(self.Scheduler.KUBERNETES)
        return sources


class Node(models.Model):
    """A GPU server, by the hostname its agent and dcgm-exporter report."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    hostname = models.CharField(max_length=255)
    server_type = models.ForeignKey(
        "carbon.ServerType", on_delete=models.PROTECT, null=True, blank=True, related_name="nodes"
    )

    class Meta:
        ordering = ["cluster__name", "hostname"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hostname"], name="node_unique_hostname")]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.hostname}"


class Gpu(models.Model):
    """One physical GPU, identified by its UUID."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    uuid = models.CharField(max_length=100, unique=True)
    index = models.PositiveSmallIntegerField()
    model_name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["node__hostname", "index"]

    def __str__(self) -> str:
        return gpu_name(self.node.hostname, self.index)


class TeamQuerySet(models.QuerySet["Team"]):
    def visible_to(self, user: object) -> TeamQuerySet:
        """Staff and finance see every team; members their own."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if user_sees_all_teams(user):  # type: ignore[arg-type]
            return self
        return self.filter(pk__in=member_team_ids(user))  # type: ignore[arg-type]


def team_scoped(queryset: _Q, user: object, *, team_path: str) -> _Q:
    """`queryset` narrowed to the rows whose team (at `team_path`) the user may see, by the one rule of
    Team.objects.visible_to; whoever sees every team gets `queryset` whole, with no subquery."""
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    if user_sees_all_teams(user):  # type: ignore[arg-type]
        return queryset
    return queryset.filter(**{f"{team_path}__in": member_team_ids(user)})  # type: ignore[arg-type]


class Team(models.Model):
    """A team that jobs are charged to. Jobs no rule matches go to the 'unassigned' team."""

    UNASSIGNED = "unassigned"

    name = models.SlugField(max_length=100, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="TeamMembership", related_name="teams")

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.display_name or self.name


class TeamMembership(models.Model):
    """A user's place in a team. Finance and admins see every team without a membership."""

    class Role(models.TextChoices):
        MEMBER = "member"
        LEAD = "lead"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["team__name", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class TeamRule(models.Model):
    """Maps jobs to a team by scheduler identity. Lower priority numbers are tried first."""

    class Kind(models.TextChoices):
        SLURM_ACCOUNT = "slurm_account", "Slurm account"
        SLURM_USER = "slurm_user", "Slurm user"
        K8S_NAMESPACE = "k8s_namespace", "Kubernetes namespace"
        USER = "user", "User (any scheduler)"
        K8S_POD_LABEL = "k8s_pod_label", "Kubernetes pod label (name=value)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="rules")
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, null=True, blank=True, help_text="Empty: every cluster."
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    value = models.CharField(max_length=255)
    priority = models.PositiveIntegerField(default=100)

    class Meta:
        ordering = ["priority", "id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "value"], name="teamrule_unique", nulls_distinct=False)
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} = {self.value} -> {self.team}"
