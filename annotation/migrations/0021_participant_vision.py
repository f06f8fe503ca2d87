# A participant's self-reported vision and screen-reader use (asked only by a mode that
# asks_vision, issue 43) and the group a crowd link required. Existing rows were never
# asked: empty vision, null screen_reader, no link group.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0020_caption_spec"),
    ]

    operations = [
        migrations.AddField(
            model_name="participant",
            name="link_group",
            field=models.CharField(
                blank=True,
                choices=[("", "Any"), ("blv", "Blind or low vision"), ("sighted", "Sighted")],
                default="",
                help_text="The group the crowd link required (its group= parameter); empty: any.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="participant",
            name="screen_reader",
            field=models.BooleanField(
                blank=True,
                help_text="Whether they use a screen reader; null when not asked.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="participant",
            name="vision",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "Not asked"),
                    ("blind", "Blind"),
                    ("low_vision", "Low vision"),
                    ("sighted", "Sighted"),
                ],
                default="",
                help_text="Self-reported vision; empty when not asked.",
                max_length=16,
            ),
        ),
    ]
