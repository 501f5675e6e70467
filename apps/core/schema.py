"""How the OpenAPI schema describes fleetwatt's own authentication."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.core.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: object) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A named, read-only API token (created under Tokens): `Authorization: Bearer fw_...`.",
        }


# What a field means wherever it appears, with its unit: the schema says it for every field that does
# not describe itself.
FIELD_GLOSSARY: dict[str, str] = {
    "id": "Identifier.",
    "name": "Name.",
    "display_name": "Name shown in the dashboards.",
    "job": "Job id.",
    "job_key": "The job on its cluster: slurm/<id>, k8s/<namespace>/<pod>, container/<id12> or proc/<pid>-<start>.",
    "job_id": "The scheduler's job id.",
    "scheduler": "slurm, k8s, container or proc.",
    "user": "User who ran the job.",
    "account": "Slurm account.",
    "namespace": "Kubernetes namespace.",
    "pod": "Kubernetes pod.",
    "start": "When the job started (ISO 8601, UTC).",
    "end": "When the job ended (ISO 8601, UTC); null while it may still run.",
    "last_seen": "The last sample that found the job (ISO 8601, UTC).",
    "first_seen": "The first sample that found the job in the hour (ISO 8601, UTC).",
    "hour": "Start of the hour (ISO 8601, UTC).",
    "gpu_count": "GPUs the job ran on.",
    "sampled_s": "Seconds of presence the agent sampled (s).",
    "expected_s": "Seconds of presence expected from the job's start to its last sample (s).",
    "sm_s": "SM-busy seconds (s).",
    "peak_memory_bytes": "Most GPU memory held (bytes).",
    "hostname": "Node hostname.",
    "gpu_index": "GPU index on its node.",
    "energy_j": "GPU energy (J).",
    "uuid": "GPU UUID.",
    "index": "GPU index on its node.",
    "model_name": "GPU model as the driver reports it.",
    "cluster": "Cluster name.",
    "site": "Site name.",
    "team": "Team name.",
    "gpu_uuid": "GPU UUID.",
    "created_at": "When it was created (ISO 8601, UTC).",
    "updated_at": "When it last changed (ISO 8601, UTC).",
    "day": "Day (UTC).",
    "flag": "Finding id the decision answers (optional).",
    "job_group": "Job group name.",
    "facility_kwh": "Facility energy (kWh).",
    "operational_kg": "Operational CO2e (kg).",
    "cost": "Cost, in the currency given.",
    "granularity": "day, week or month.",
    "intensity_zones": "Grid zones whose intensity was used.",
    "periods": "One entry per period.",
    "embodied_kg_per_useful_gpu_hour": "Embodied CO2e per GPU-hour jobs occupied (kg/h); null without server types.",
    "match_value": "Value the match kind compares with.",
    "at": "When (ISO 8601, UTC).",
    "actor": "Admin who decided.",
    "flag_id": "Finding the decision answered, if any.",
    "flag_kind": "Kind of that finding.",
    "reason": "Why, as the admin wrote it.",
    "before": "The job's or finding's values before.",
    "after": "Their values after.",
    "count": "Number of results.",
    "next": "Next page's URL, or null.",
    "previous": "Previous page's URL, or null.",
    "results": "This page's results.",
    "time_zone": "Time zone of the report's week.",
    "subject": "Email subject.",
    "recipient_count": "Addresses it was sent to.",
    "claimed_at": "When a run claimed it for sending (ISO 8601, UTC).",
    "sent_at": "When it was sent (ISO 8601, UTC).",
    "error": "Why sending failed, if it did.",
    "action": "The decision: acknowledge, dispute, exclude, include, reassign_team or reassign_group.",
    "kind": "Kind of finding.",
    "status": "Where the finding stands: open, acknowledged, disputed or resolved.",
    "source": "agent (fleetwatt-agent) or dcgm (dcgm-exporter only).",
    "match_kind": "What the group matches jobs on.",
}


def describe_fields(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular post-processing hook: every property gets a description."""
    for schema in result.get("components", {}).get("schemas", {}).values():
        for name, prop in schema.get("properties", {}).items():
            if "description" in prop or name not in FIELD_GLOSSARY:
                continue
            if "$ref" in prop:  # a description beside a bare $ref would be ignored: wrap it
                prop["allOf"] = [{"$ref": prop.pop("$ref")}]
            prop["description"] = FIELD_GLOSSARY[name]
    return result
