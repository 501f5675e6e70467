"""A team's billed jobs with their currency in one index (the sums of rounded job costs join to it), built
without locking the jobs table against the ingest's writes."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("carbon", "0005_job_group_match_group_key"),
        ("fleet", "0007_cluster_prometheus_connection"),
        ("jobs", "0010_method_sm_mem"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                condition=models.Q(("excluded_from_bill", False)),
                fields=["team", "id"],
                include=("currency",),
                name="job_billed_team",
            ),
        ),
    ]
