"""Jobs count their runs and stamp a heartbeat (issue 12: bounded jobs that always end).

Rows from before have no heartbeat; the sweep reads their ``started_at`` instead.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0005_structure"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="attempts",
            field=models.PositiveSmallIntegerField(
                default=0,
                help_text="Runs started; past CAPEVAL_JOB_MAX_ATTEMPTS the job is failed.",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="heartbeat_at",
            field=models.DateTimeField(
                blank=True, help_text="Last sign of life of the process running the job.", null=True
            ),
        ),
    ]
