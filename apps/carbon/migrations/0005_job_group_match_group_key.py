"""Job groups can match the scheduler's own group of a job (Job.group_key): a Slurm array, a Kubernetes owner."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("carbon", "0004_team_day_to_rollups"),
    ]

    operations = [
        migrations.AlterField(
            model_name="jobgroup",
            name="match_kind",
            field=models.CharField(
                choices=[
                    ("account", "Slurm account"),
                    ("name_prefix", "Job name starts with"),
                    ("namespace", "Kubernetes namespace"),
                    ("user", "User"),
                    ("group_key", "Scheduler group (Slurm array, Kubernetes owner)"),
                ],
                max_length=20,
            ),
        ),
    ]
