# THumB's native-English flag now lives in the mode's own table (capeval_thumb.Rater, issue
# 44); its migration copies the values before this drops the column.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0018_guidelines"),
        ("capeval_thumb", "0001_initial"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="user",
            name="native_english",
        ),
    ]
