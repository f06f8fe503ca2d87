"""HUMANr head-to-head (PROTOCOLS.md section 3).

From "ObjectNet Captions: Models are not superhuman captioners" (section 4.2, Fig. 1 and
Fig. 4): workers see an image with two captions, a human one and a model's (or a second
human's, the baseline), and answer on a 1-9 scale which goes best with the image; a
system's HUMANr is the mean answer oriented to the human caption and scaled to [-1, 1].
Comparisons come in groups of ten trials with one attention check, and a failed check
drops its group. ``protocol`` holds the groups, serving and scoring; ``pages``, ``report``
and ``export`` hold the rest.
"""
