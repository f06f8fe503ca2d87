# Another release's human labels of an imported pair (issue 47): FLEUR's files label 35 of
# Pascal-50S's 4,000 pairs otherwise than pascal_50s.json; the metric lab chooses which.
# Existing pairs carry none: an empty object.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0022_item_sampling"),
    ]

    operations = [
        migrations.AddField(
            model_name="pairjudgment",
            name="labels",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Other releases' labels of this pair (0 caption_a, 1 caption_b), by "
                "the name of the imported metric column whose pair files carried them (FLEUR).",
            ),
        ),
    ]
