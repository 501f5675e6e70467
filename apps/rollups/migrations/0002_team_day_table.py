"""The moved table takes the rollups app's name."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("rollups", "0001_team_day_from_carbon"),
        ("carbon", "0004_team_day_to_rollups"),
    ]

    operations = [
        migrations.AlterModelTable(name="teamday", table=None),
    ]
