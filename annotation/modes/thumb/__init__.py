"""The THumB rubric (Kasai et al. 2022): an image's caption set scored in two stages.

Items, one set per image:

* ``stage1``: an annotator scores every caption group of the image (P, R, penalties);
* ``stage2``: a different annotator sees the stage-1 scores and confirms or modifies each
  field; served only once stage 1 is judged, never to the stage-1 annotator;
* ``fluency``: created after the last stage when no annotator of the image is a native
  English speaker (the app's own ``Rater`` table, ``models.py``); served to native
  speakers only;
* ``check``: a third annotator's review of the final (stage-2) scores of the image's
  captions in the study's random sample (``third_check_captions``, drawn when the study
  opens), created when stage 2 is stored and served only to someone who did neither stage
  of the image. It measures the two stages (the report's check agreement); the scores stay
  stage 2's.

A caption group is one normalised text: identical texts of several systems are shown once
and the scores apply to each caption of the group. Only one caption per (image, system)
is shown (the first imported); further captions of a system, e.g. extra human references,
are left out, so the report has one row per (image, system) as the paper's tables do.

The protocol rules and the statistics live in ``rubrics.thumb``; ``protocol`` maps them onto
items, judgments and participants, ``pages``, ``report`` and ``export`` onto the pages, the
report and the export table.
"""
