"""The arena: battles between captioning systems (PROTOCOLS.md section 5).

A worker sees an image and two captions of two different systems, sides drawn per lease,
and answers one of LMArena's four outcomes (optionally ImageInWords' five per-criterion
labels); the report fits a Bradley-Terry leaderboard on LMArena's scale with bootstrap
intervals, beside a length-controlled one (``rubrics/arena.py``, ``rubrics/arena_style.py``).
Gold battles feed the catch-trial exclusion rule (``annotation/modes/catch.py``).
"""
