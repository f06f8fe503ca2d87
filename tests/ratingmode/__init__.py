"""A tiny protocol used only by the tests, built by the recipe of ``docs/architecture.md``
("How to add a mode") exactly as a real mode is: a Django app (``apps.py``) whose
``mode.py`` registers the mode, with its own templates, static files, importer and
dashboard panel.

"test-rating": one item per caption, each answered with a whole-number ``rating`` from 1 to
5, in ``parts`` consecutive parts, no faster than ``min_seconds`` per part. The item page
loads the mode's own script (keys 1-5 choose a rating, a live note says it in words) and
stylesheet; ``importers.py`` reads a CSV of rated captions (``test-rating-csv``);
``dashboard.py`` counts the ratings of each value.

``tests/conftest.py`` installs the app for the tests (its one line outside this folder);
Django imports this package before the models are ready, so it holds only the mode's
description and name.
"""

#: The mode's name (``Study.mode``), read by the builders of the mode-agnostic tests.
NAME = "test-rating"
