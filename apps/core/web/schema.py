"""How the OpenAPI schema describes fleetwatt's own authentication."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.core.access.authentication.ApiTokenAuthentication"
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


ERROR_STATUSES = {
    "400": "A parameter or body it does not take (the body names each one and what is wrong with it).",
    "401": "No credentials, or credentials it does not know.",
    "403": "Not allowed: finance and API tokens write nothing; fleet-wide lists are for admins and finance.",
    "404": "No such object, or one of a team the user is not in.",
}
ERROR_SCHEMA = {
    "type": "object",
    "description": "DRF's error body: `detail` for a refusal or a whole-request error, else one entry per "
    "parameter or field named, with what is wrong with it (a message, or a list of them).",
    "properties": {
        "detail": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "What is wrong, in words.",
        }
    },
    "additionalProperties": {"description": "A parameter's or field's message, or list of messages."},
}
CSV_SCHEMA = {
    "type": "string",
    "description": "CSV (RFC 4180, CRLF, UTF-8), one row per result, with a header of the JSON fields (nested "
    "ones as `parent.child`, units in the names); asked with `?format=csv` or `Accept: text/csv`.",
}


def describe_fields(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular post-processing hook (the one settings name from this module): every property gets
    a description, then every operation its error responses and its CSV (`declare_errors_and_csv`)."""
    for schema in result.get("components", {}).get("schemas", {}).values():
        for name, prop in schema.get("properties", {}).items():
            if "description" in prop or name not in FIELD_GLOSSARY:
                continue
            if "$ref" in prop:  # a description beside a bare $ref would be ignored: wrap it
                prop["allOf"] = [{"$ref": prop.pop("$ref")}]
            prop["description"] = FIELD_GLOSSARY[name]
    return declare_errors_and_csv(result)


def declare_errors_and_csv(result: dict) -> dict:
    """Every operation answers 400, 401, 403 and 404 with DRF's error body (a generated client parses them
    into a typed error instead of returning None), and a GET's `text/csv` answer is declared as CSV text,
    not as the JSON document's schema (a write answers JSON only)."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/Error"}
    for ops in result.get("paths", {}).values():
        for method, op in ops.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for status, response in op["responses"].items():
                content = response.get("content", {})
                if not status.startswith("2") or "text/csv" not in content:
                    continue
                if method == "get":
                    content["text/csv"] = {"schema": CSV_SCHEMA}
                else:
                    del content["text/csv"]
            for status, description in ERROR_STATUSES.items():
                op["responses"].setdefault(
                    status, {"description": description, "content": {"application/json": {"schema": ref}}}
                )
    return result
