"""Error spans: mark what is wrong in a detailed caption, then score it (PROTOCOLS.md
section 6; ESA, Kocmi et al. 2024; MQM, Freitag et al. 2021).

One item per caption: the annotator marks spans (code-point offsets, severity, category),
omissions and a whole-caption "unusable" mark, then gives a 0-100 score. The report gives
per-system mean ESA scores with intervals, MQM-weighted errors per caption and per 100
words, error counts, span and score agreement, and the adjudication view.
"""
