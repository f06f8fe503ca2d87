"""Pure protocol rules and statistics for CapEval (no Django import anywhere).

Modules: ``thumb`` (THumB rubric), ``vicr`` (VICR rating game), ``humanr``
(HUMANr head-to-head), ``agreement`` (inter-rater statistics) and
``resampling`` (bootstrap and half-splits). See ``../shared/PROTOCOLS.md``.
"""
