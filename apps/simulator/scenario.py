"""Fleet scenarios: a YAML file that describes nodes, GPUs, jobs and faults (validated as a whole)."""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

SCENARIO_DIR = Path(__file__).parent / "scenarios"

_DURATION = re.compile(r"^\s*(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$")


class ScenarioError(ValueError):
    """The scenario file is wrong; the message says where."""


def parse_duration(value: Any, where: str) -> int:
    """'1d2h30m', '90s', or a number of seconds -> whole seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    m = _DURATION.match(str(value))
    if not m or not any(m.groups()):
        raise ScenarioError(f"{where}: {value!r} is not a duration like 2h30m or 90s")
    d, h, mi, s = (int(x or 0) for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


Profile = list[tuple[int, float]]  # (seconds since job start, value), piecewise constant


def profile_at(profile: Profile, since_start: float) -> float:
    """A step profile's value at a time (seconds since the job's start): that of its last step begun."""
    value = profile[0][1]
    for t, v in profile:
        if since_start >= t:
            value = v
    return value


def _profile(value: Any, where: str) -> Profile:
    if isinstance(value, int | float):
        return [(0, float(value))]
    if isinstance(value, list) and value and all(isinstance(p, list | tuple) and len(p) == 2 for p in value):
        points = [(parse_duration(t, where), float(v)) for t, v in value]
        if points[0][0] != 0 or any(b[0] <= a[0] for a, b in itertools.pairwise(points)):
            raise ScenarioError(f"{where}: profile times must start at 0 and increase")
        return points
    raise ScenarioError(f"{where}: expected a number or a list of [time, value] pairs")


@dataclass
class NodeSpec:
    hostname: str
    gpus: int = 8
    agent: bool = True
    dcgm: bool = True
    dcgm_pod_labels: bool = False
    dcgm_pod_values: str = "copies"  # 'copies': every pod's series repeats the GPU's; 'own': per-pod util/memory
    # 'current': the agent exports docs/metrics.md's contract; 'core': only DESIGN section 2's rows (an
    # older agent during a rolling upgrade: no GPU sampled seconds, job occupancy or last-seen series).
    agent_contract: str = "current"


SERVING_ENGINES = ("vllm",)


@dataclass(frozen=True)
class ServingSpec:
    """An inference server the job runs (apps.simulator.serving): it generates `tokens_per_s` output tokens a second
    at 100 % SM and in proportion below it (tokens follow its load), `prompt_ratio` prompt tokens per output token,
    and finishes a request every `tokens_per_request` output tokens. At each of `restarts` (seconds since the job's
    start) the engine restarts in its pod: its counters start again from 0. In each span of `unscraped` ([from, to),
    seconds since the job's start) Prometheus did not scrape the engine (its metrics port unreachable, a lost
    target): its counters go on counting, and no sample of them is kept."""

    engine: str = "vllm"
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    tokens_per_s: float = 2000.0
    prompt_ratio: float = 3.0
    tokens_per_request: float = 250.0
    restarts: tuple[int, ...] = ()
    unscraped: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class WorkSpec:
    """A training job's own work counter (`fleetwatt_job_work_units_total{unit}`, docs/metrics.md, "Work counters"):
    `per_s` units a second at 100 % SM, in proportion below it, at full clock. Under a power limit below its draw it
    runs slower (apps.simulator.power_cap): `memory_bound` is the share of a step the SM clock does not speed up."""

    unit: str = "step"
    per_s: float = 1.0
    memory_bound: float = 0.0


@dataclass
class JobSpec:
    scheduler: str
    node: str
    gpus: list[int]
    start_s: int
    end_s: int
    sm: Profile
    power_w: Profile
    memory_bytes: int
    job_id: str = ""
    user: str = ""
    account: str = ""
    namespace: str = ""
    pod: str = ""
    name: str = ""
    # What its scheduler says of it (Slurm's accounting, kube-state-metrics): the state it ends in (a job
    # still running at the scenario's end or at `now` is running), its exit, its queue and what it asked for.
    state: str = "completed"  # completed, failed, cancelled, timeout, out_of_memory, node_fail, preempted
    exit_code: int | None = None  # None: 0 when completed, 1 when failed
    signal: int = 0
    partition: str = "gpu"
    qos: str = "normal"
    gpus_requested: int | None = None  # None: the GPUs it runs on
    submit_s: int | None = None  # None: a minute before its start
    labels: dict[str, str] = field(default_factory=dict)  # Kubernetes pod labels
    owner_kind: str = ""  # Kubernetes owner: Job, CronJob, Deployment, StatefulSet, JobSet...
    owner_name: str = ""
    serving: ServingSpec | None = None  # an inference server: its engine's token and request counters
    work: WorkSpec | None = None  # its own work counter

    @property
    def job_key(self) -> str:
        match self.scheduler:
            case "slurm":
                return f"slurm/{self.job_id}"
            case "k8s":
                return f"k8s/{self.namespace}/{self.pod}"
            case "container":
                return f"container/{self.job_id[:12]}"
        return f"proc/{self.job_id}"


@dataclass
class FaultSpec:
    kind: str  # agent_down | scrape_gap | counter_reset
    node: str
    start_s: int
    end_s: int = 0
    gpu: int | None = None


@dataclass(frozen=True)
class PowerLimitSpec:
    """From `at_s` on, the GPU's (every GPU of the node's, where `gpu` is None) enforced power limit is `watts`."""

    node: str
    at_s: int
    watts: float
    gpu: int | None = None


@dataclass
class Scenario:
    name: str
    start: datetime
    duration_s: int
    scrape_interval_s: int = 15
    scrape_offset_s: float = 0.0
    linger_s: int = 300
    gpu_model: str = "NVIDIA H200"
    idle_power_w: float = 75.0
    tdp_w: float = 700.0
    # The GPUs' settings (docs/metrics.md, "Power limits and clocks"), exported by the agent (a 'current' contract)
    # and dcgm-exporter only where `gpu_settings` is on: the limit is the TDP unless `power_limits` change it,
    # the SM clock is `sm_clock_mhz` while a job computes on the GPU and `idle_sm_clock_mhz` otherwise.
    gpu_settings: bool = False
    sm_clock_mhz: float = 1980.0
    idle_sm_clock_mhz: float = 345.0
    power_limits: list[PowerLimitSpec] = field(default_factory=list)
    nodes: list[NodeSpec] = field(default_factory=list)
    jobs: list[JobSpec] = field(default_factory=list)
    faults: list[FaultSpec] = field(default_factory=list)

    @property
    def t0(self) -> float:
        return self.start.timestamp()

    def node(self, hostname: str) -> NodeSpec:
        for n in self.nodes:
            if n.hostname == hostname:
                return n
        raise KeyError(hostname)

    def gpu_uuid(self, hostname: str, index: int) -> str:
        """Stable, UUID-shaped identifiers derived from the node and index."""
        rnd = random.Random(f"{hostname}/{index}")
        h = "".join(rnd.choice("0123456789abcdef") for _ in range(32))
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _start(value: Any, now: datetime | None) -> datetime:
    """An ISO time, or 'now-7d' relative to the current hour (for the demo)."""
    text = str(value)
    if text.startswith("now"):
        base = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
        rest = text[3:].strip()
        if not rest:
            return base
        sign = -1 if rest[0] == "-" else 1
        return base + sign * timedelta(seconds=parse_duration(rest[1:], "start"))
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ScenarioError(f"start: {value!r} is not an ISO time or now-<duration>") from None
    if dt.tzinfo is None:
        raise ScenarioError("start: needs a time zone (Z or an offset)")
    return dt.astimezone(UTC)


def scenario_load(path_or_name: str | Path, *, now: datetime | None = None) -> Scenario:
    path = Path(path_or_name)
    if not path.exists() and (SCENARIO_DIR / f"{path_or_name}.yaml").exists():
        path = SCENARIO_DIR / f"{path_or_name}.yaml"
    if not path.exists():
        raise ScenarioError(f"No scenario file {path_or_name!r} (shipped: {', '.join(scenario_names())})")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    return scenario_from_dict(raw, now=now)


def scenario_names() -> list[str]:
    """The shipped scenarios; the fleet configs beside them (docs/config.md: a `version` at the top) are not."""
    names = []
    for path in SCENARIO_DIR.glob("*.yaml"):
        raw = yaml.safe_load(path.read_text())
        if not (isinstance(raw, dict) and "version" in raw):
            names.append(path.stem)
    return sorted(names)


def scenario_from_dict(raw: dict[str, Any], *, now: datetime | None = None) -> Scenario:
    """A scenario from its parsed file. Anything not shaped as docs/simulator.md says (a list where a mapping
    belongs, a word where a number does) is a ScenarioError, never another exception from inside."""
    try:
        return _scenario_from_dict(raw, now=now)
    except ScenarioError:
        raise
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise ScenarioError(f"a part of the scenario is not shaped as docs/simulator.md says ({detail})") from exc


def _scenario_from_dict(raw: dict[str, Any], *, now: datetime | None) -> Scenario:
    if not isinstance(raw, dict):
        raise ScenarioError("a scenario is a mapping")
    sc = Scenario(
        name=str(raw.get("name", "scenario")),
        start=_start(raw.get("start", "now-1d"), now),
        duration_s=parse_duration(raw.get("duration", "1d"), "duration"),
        scrape_interval_s=int(raw.get("scrape_interval_s", 15)),
        scrape_offset_s=float(raw.get("scrape_offset_s", 0.0)),
        linger_s=int(raw.get("linger_s", 300)),
        gpu_model=str(raw.get("gpu_model", "NVIDIA H200")),
        idle_power_w=float(raw.get("idle_power_w", 75.0)),
        tdp_w=float(raw.get("tdp_w", 700.0)),
        gpu_settings=bool(raw.get("gpu_settings", False)),
        sm_clock_mhz=float(raw.get("sm_clock_mhz", 1980.0)),
        idle_sm_clock_mhz=float(raw.get("idle_sm_clock_mhz", 345.0)),
    )
    for i, n in enumerate(raw.get("nodes", [])):
        count = int(n.get("count", 1))
        for k in range(count):
            hostname = n["hostname"] if count == 1 and "hostname" in n else f"{n.get('prefix', 'node')}{k + 1:02d}"
            sc.nodes.append(
                NodeSpec(
                    hostname=hostname,
                    gpus=int(n.get("gpus", 8)),
                    agent=bool(n.get("agent", True)),
                    dcgm=bool(n.get("dcgm", True)),
                    dcgm_pod_labels=bool(n.get("dcgm_pod_labels", False)),
                    dcgm_pod_values=str(n.get("dcgm_pod_values", "copies")),
                    agent_contract=str(n.get("agent_contract", "current")),
                )
            )
            if sc.nodes[-1].dcgm_pod_values not in ("copies", "own"):
                raise ScenarioError(f"nodes[{i}].dcgm_pod_values: 'copies' or 'own'")
            if sc.nodes[-1].agent_contract not in ("current", "core"):
                raise ScenarioError(f"nodes[{i}].agent_contract: 'current' or 'core'")
    hostnames = [n.hostname for n in sc.nodes]
    if len(set(hostnames)) != len(hostnames):
        raise ScenarioError("nodes: duplicate hostnames")
    for i, j in enumerate(raw.get("jobs", [])):
        sc.jobs.append(_job(j, f"jobs[{i}]", sc))
    if "generate" in raw:
        sc.jobs.extend(_generated_jobs(raw["generate"], sc))
    for i, f in enumerate(raw.get("faults", [])):
        where = f"faults[{i}]"
        kind = f.get("kind")
        if kind not in ("agent_down", "scrape_gap", "counter_reset"):
            raise ScenarioError(f"{where}.kind: agent_down, scrape_gap or counter_reset")
        if f.get("node") not in hostnames:
            raise ScenarioError(f"{where}.node: unknown node {f.get('node')!r}")
        start = parse_duration(f.get("start", f.get("at", 0)), where)
        end = parse_duration(f.get("end", 0), where) if kind != "counter_reset" else start
        if kind != "counter_reset" and end <= start:
            raise ScenarioError(f"{where}: end must be after start")
        sc.faults.append(FaultSpec(kind=kind, node=f["node"], start_s=start, end_s=end, gpu=f.get("gpu")))
    for i, p in enumerate(raw.get("power_limits", [])):
        where = f"power_limits[{i}]"
        if p.get("node") not in hostnames:
            raise ScenarioError(f"{where}.node: unknown node {p.get('node')!r}")
        watts = float(p.get("watts", 0))
        if not sc.idle_power_w < watts <= 10_000:
            raise ScenarioError(f"{where}.watts: above idle_power_w ({sc.idle_power_w:g}) and at most 10000")
        gpu = None if p.get("gpu") is None else int(p["gpu"])
        sc.power_limits.append(
            PowerLimitSpec(node=p["node"], at_s=parse_duration(p.get("at", 0), where), watts=watts, gpu=gpu)
        )
    _validate(sc)
    return sc


def _job(j: dict[str, Any], where: str, sc: Scenario) -> JobSpec:
    try:
        scheduler = j["scheduler"]
        node = j["node"]
    except KeyError as exc:
        raise ScenarioError(f"{where}: missing {exc.args[0]}") from None
    if scheduler not in ("slurm", "k8s", "container", "proc"):
        raise ScenarioError(f"{where}.scheduler: slurm, k8s, container or proc")
    gpus = j.get("gpus", [0])
    gpus = list(range(gpus)) if isinstance(gpus, int) else [int(g) for g in gpus]
    return JobSpec(
        scheduler=scheduler,
        node=node,
        gpus=gpus,
        start_s=parse_duration(j.get("start", 0), f"{where}.start"),
        end_s=parse_duration(j.get("end", sc.duration_s), f"{where}.end"),
        sm=_profile(j.get("sm", 50), f"{where}.sm"),
        power_w=_profile(j.get("power_w", 400), f"{where}.power_w"),
        memory_bytes=int(float(j.get("memory_gib", 10)) * 1024**3),
        job_id=str(j.get("job_id", "")),
        user=str(j.get("user", "")),
        account=str(j.get("account", "")),
        namespace=str(j.get("namespace", "")),
        pod=str(j.get("pod", "")),
        name=str(j.get("name", "")),
        state=_state(j.get("state", "completed"), f"{where}.state"),
        exit_code=None if j.get("exit_code") is None else int(j["exit_code"]),
        signal=int(j.get("signal", 0)),
        partition=str(j.get("partition", "gpu")),
        qos=str(j.get("qos", "normal")),
        gpus_requested=None if j.get("gpus_requested") is None else int(j["gpus_requested"]),
        submit_s=None if j.get("submit") is None else parse_duration(j["submit"], f"{where}.submit"),
        labels=_labels(j.get("labels", {}), f"{where}.labels"),
        owner_kind=str(j.get("owner_kind", "")),
        owner_name=str(j.get("owner_name", "")),
        serving=_serving(j.get("serving"), f"{where}.serving"),
        work=_work(j.get("work"), f"{where}.work"),
    )


def _work(value: Any, where: str) -> WorkSpec | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"unit", "per_s", "memory_bound"}:
        raise ScenarioError(f"{where}: {{unit: step, per_s: 2.5, memory_bound: 0.2}}")
    per_s, memory_bound = float(value.get("per_s", 1.0)), float(value.get("memory_bound", 0.0))
    if per_s <= 0 or not 0.0 <= memory_bound <= 1.0:
        raise ScenarioError(f"{where}: per_s over 0, memory_bound from 0 to 1")
    return WorkSpec(unit=str(value.get("unit", "step")), per_s=per_s, memory_bound=memory_bound)


def _spans(value: Any, where: str) -> tuple[tuple[int, int], ...]:
    """[[from, to], ...] as durations -> sorted (from, to) pairs in whole seconds, each from < to."""
    if not isinstance(value, list) or not all(isinstance(p, list | tuple) and len(p) == 2 for p in value):
        raise ScenarioError(f"{where}: a list of [from, to] pairs such as [[50m, 2h10m]]")
    spans = tuple(sorted((parse_duration(a, where), parse_duration(b, where)) for a, b in value))
    if any(a >= b for a, b in spans):
        raise ScenarioError(f"{where}: each span's end must come after its start")
    return spans


def _serving(value: Any, where: str) -> ServingSpec | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: a mapping such as {{engine: vllm, model: ..., tokens_per_s: 2000}}")
    keys = {"engine", "model", "tokens_per_s", "prompt_ratio", "tokens_per_request", "restarts", "unscraped"}
    unknown = set(value) - keys
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
    restarts = tuple(sorted(parse_duration(t, f"{where}.restarts") for t in value.get("restarts", [])))
    unscraped = _spans(value.get("unscraped", []), f"{where}.unscraped")
    default = ServingSpec()
    spec = ServingSpec(
        engine=str(value.get("engine", default.engine)),
        model=str(value.get("model", default.model)),
        tokens_per_s=float(value.get("tokens_per_s", default.tokens_per_s)),
        prompt_ratio=float(value.get("prompt_ratio", default.prompt_ratio)),
        tokens_per_request=float(value.get("tokens_per_request", default.tokens_per_request)),
        restarts=restarts,
        unscraped=unscraped,
    )
    if spec.engine not in SERVING_ENGINES:
        raise ScenarioError(f"{where}.engine: one of {', '.join(SERVING_ENGINES)}")
    if spec.tokens_per_s <= 0 or spec.prompt_ratio < 0 or spec.tokens_per_request <= 0:
        raise ScenarioError(f"{where}: tokens_per_s and tokens_per_request over 0, prompt_ratio 0 or more")
    return spec


JOB_STATES = ("completed", "failed", "cancelled", "timeout", "out_of_memory", "node_fail", "preempted")


def _state(value: Any, where: str) -> str:
    state = str(value).lower()
    if state not in JOB_STATES:
        raise ScenarioError(f"{where}: {value!r} is not one of {', '.join(JOB_STATES)}")
    return state


def _labels(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: a mapping of label names to values")
    return {str(k): str(v) for k, v in value.items()}


# How generated runs end (fractions, in this order); drawn from a generator of their own, so adding states
# did not move the generated jobs themselves.
_GENERATED_ENDINGS = (("failed", 0.08), ("cancelled", 0.05), ("timeout", 0.03), ("out_of_memory", 0.02))


def _generated_ending(seed: Any, job_id: int) -> str:
    draw, edge = random.Random(f"{seed}/state/{job_id}").random(), 0.0
    for state, fraction in _GENERATED_ENDINGS:
        edge += fraction
        if draw < edge:
            return state
    return "completed"


def _generated_jobs(gen: dict[str, Any], sc: Scenario) -> list[JobSpec]:
    """A deterministic, plausible workload: whole-node trainings, single-GPU runs, notebooks."""
    rnd = random.Random(gen.get("seed", 1))
    teams = gen.get("teams", [])
    nodes = [n for n in sc.nodes if n.hostname not in set(gen.get("skip_nodes", []))]
    jobs: list[JobSpec] = []
    next_id = int(gen.get("first_job_id", 100000))
    for node in nodes:
        for gpu in range(node.gpus):
            t = rnd.randint(0, 3 * 3600)
            while True:
                length = int(rnd.choice([0.25, 1, 2, 4, 6, 12, 24]) * 3600 * rnd.uniform(0.7, 1.3))
                if t + length > sc.duration_s - 2 * 3600:
                    break
                team = rnd.choice(teams)
                k8s = node.dcgm_pod_labels or team.get("scheduler") == "k8s"
                sm = rnd.choice([95, 85, 60, 30])
                spec = {
                    "scheduler": "k8s" if k8s else "slurm",
                    "node": node.hostname,
                    "gpus": [gpu],
                    "start": t,
                    "end": t + length,
                    "sm": [[0, sm], [max(60, length // 3), max(1, sm - rnd.randint(0, 20))]],
                    "power_w": [[0, 150 + sm * 5.5], [max(60, length // 3), 120 + sm * 5]],
                    "memory_gib": rnd.choice([8, 20, 40, 70]),
                    "job_id": str(next_id),
                    "user": rnd.choice(team.get("users", ["user"])),
                    "account": team.get("account", ""),
                    # A Slurm team's run on a Kubernetes node lands in a namespace named after its account.
                    "namespace": team.get("namespace") or (team.get("account", "default") if k8s else ""),
                    "pod": f"{team.get('namespace') or team.get('account', 'ns')}-run-{next_id}",
                    "name": rnd.choice(["train", "finetune", "eval", "sweep", "infer"]) + f"-{next_id}",
                    "state": _generated_ending(gen.get("seed", 1), next_id),
                }
                serving = gen.get("serving")
                if serving and k8s and str(spec["name"]).startswith("infer"):
                    # The inference runs of Kubernetes teams serve a model: chosen by the job's id, not drawn, so
                    # that the rest of the workload stays as it was.
                    models = list(serving.get("models", [ServingSpec.model]))
                    spec["serving"] = {**{k: v for k, v in serving.items() if k != "models"},
                                       "model": models[next_id % len(models)]}  # fmt: skip
                if k8s:
                    owner = team.get("namespace") or team.get("account", "")
                    spec["labels"] = {"team": owner, "app": str(spec["name"]).split("-")[0]}
                    spec["owner_kind"], spec["owner_name"] = "Job", str(spec["name"])
                jobs.append(_job(spec, f"generate job {next_id}", sc))
                next_id += 1
                t += length + rnd.randint(60, 4 * 3600)
    return jobs


def _validate(sc: Scenario) -> None:
    if sc.duration_s <= 0:
        raise ScenarioError("duration must be positive")
    if sc.scrape_interval_s <= 0 or 3600 % sc.scrape_interval_s:
        raise ScenarioError("scrape_interval_s must divide an hour")
    keys: set[str] = set()
    for job in sc.jobs:
        where = f"job {job.job_key}"
        try:
            node = sc.node(job.node)
        except KeyError:
            raise ScenarioError(f"{where}: unknown node {job.node!r}") from None
        if any(g < 0 or g >= node.gpus for g in job.gpus):
            raise ScenarioError(f"{where}: GPU index out of range on {node.hostname}")
        if not 0 <= job.start_s < job.end_s:
            raise ScenarioError(f"{where}: start must be before end")
        if job.job_key in keys:
            raise ScenarioError(f"{where}: duplicate job")
        keys.add(job.job_key)
