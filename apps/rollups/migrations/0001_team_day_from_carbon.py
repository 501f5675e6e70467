"""TeamDay moves from the carbon app to rollups: the table stays, only Django's state changes here."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("carbon", "0003_team_days"),
        ("fleet", "0002_cluster_site_node_server_type"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TeamDay",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("day", models.DateField()),
                        ("energy_j", models.FloatField(default=0.0)),
                        ("occupancy_s", models.FloatField(default=0.0)),
                        ("facility_kwh", models.FloatField(default=0.0)),
                        ("operational_kg", models.FloatField(default=0.0)),
                        ("embodied_kg", models.FloatField(default=0.0)),
                        ("cost", models.DecimalField(decimal_places=6, default=0, max_digits=18)),
                        ("energy_by_method_j", models.JSONField(default=dict)),
                        ("cluster", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="team_days", to="fleet.cluster")),
                        ("team", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="days", to="fleet.team")),
                    ],
                    options={
                        "ordering": ["team_id", "day", "cluster_id"],
                        "constraints": [models.UniqueConstraint(fields=("team", "cluster", "day"), name="teamday_unique")],
                        "db_table": "carbon_teamday",
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
