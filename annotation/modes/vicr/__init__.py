"""The VICR rating game (PROTOCOLS.md section 2): tutorial, probation, game, report.

From Narins et al. 2023, "Validated Image Caption Rating Dataset" (NeurIPS Datasets and
Benchmarks): players learn the 1-to-5 scale on pairs with expert ratings (the tutorial, and
probation when they fall short), then rate image-caption pairs in a game scored against the
consensus of the pair's earlier ratings (Algorithm 1). ``protocol`` holds the rules and
the player's phases; ``pages``, ``report`` and ``export`` hold the rest.
"""
