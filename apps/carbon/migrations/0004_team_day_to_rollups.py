"""TeamDay now lives in the rollups app (same table): drop it from this app's state only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("carbon", "0003_team_days"),
        ("rollups", "0001_team_day_from_carbon"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="TeamDay")], database_operations=[]),
    ]
