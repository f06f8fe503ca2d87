"""One place for the phase: a judgment's phase is its item's kind, so the copy goes.

``Judgment.phase`` always held ``item.kind`` (the modes returned it). Before dropping the
column the migration checks that no judgment says otherwise, so nothing a participant did
is lost: a mismatch stops the migration (inside its transaction) with the ids to look at.

``Assignment.state`` held one thing, who released a lease early: it becomes the explicit
column ``released_by`` (copied over), and the free-form JSON goes.
"""

from django.db import migrations, models
from django.db.models import F


def copy_released_by(apps, schema_editor):
    Assignment = apps.get_model("annotation", "Assignment")
    for lease in Assignment.objects.exclude(state={}).only("id", "state").iterator():
        by = (lease.state or {}).get("released_by")
        if by:
            Assignment.objects.filter(pk=lease.pk).update(released_by=str(by)[:150])


def refuse_a_phase_the_item_does_not_have(apps, schema_editor):
    Judgment = apps.get_model("annotation", "Judgment")
    odd = list(
        Judgment.objects.exclude(phase="")
        .exclude(phase=F("item__kind"))
        .values_list("id", flat=True)[:20]
    )
    if odd:
        raise RuntimeError(
            "These judgments have a phase other than their item's kind, which the migration "
            f"would lose: {odd} (showing at most 20). Export the study first."
        )


class Migration(migrations.Migration):
    dependencies = [("annotation", "0004_crowd_integrity")]

    operations = [
        migrations.RunPython(refuse_a_phase_the_item_does_not_have, migrations.RunPython.noop),
        migrations.RemoveField(model_name="judgment", name="phase"),
        migrations.AddField(
            model_name="assignment",
            name="released_by",
            field=models.CharField(
                blank=True, help_text="Who released the lease early (a user name).", max_length=150
            ),
        ),
        migrations.RunPython(copy_released_by, migrations.RunPython.noop),
        migrations.RemoveField(model_name="assignment", name="state"),
    ]
