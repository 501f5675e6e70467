"""The pages' indexes of jobs: those under the coverage threshold, a team's job ids (the team page's job list and
breakdowns join the period's rows to it) and a team's jobs excluded from the bill (few), built without locking the
jobs table against the ingest's writes."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("carbon", "0005_job_group_match_group_key"),
        ("fleet", "0008_cluster_dcgm_host_label"),
        ("jobs", "0018_job_work_hour"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(condition=models.Q(("sampled_s__gt", 0)), fields=["coverage"], name="job_sampled_coverage"),
        ),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(fields=["team", "id"], name="job_team_id"),
        ),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(condition=models.Q(("excluded_from_bill", True)), fields=["team"], name="job_excluded_team"),
        ),
    ]
