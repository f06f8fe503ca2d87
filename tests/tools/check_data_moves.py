"""Compare a demo database before issue 44's data migrations with a migrated copy of it.

Issue 44 moved VICR's caption columns (``prime_ratings``, ``truth``, ``explanation``) into
``Caption.spec`` (migration 0020) and THumB's ``User.native_english`` into
``capeval_thumb.Rater`` (thumb 0001, annotation 0019). Every old value must be in its new
place. Made with the old code, then copied and migrated with the new:

    CAPEVAL_VAR_DIR=/tmp/snap/old python manage.py migrate      # at the old commit
    CAPEVAL_VAR_DIR=/tmp/snap/old python manage.py load_demo
    cp -r /tmp/snap/old /tmp/snap/new
    CAPEVAL_VAR_DIR=/tmp/snap/new python manage.py migrate      # at the new commit
    python -m tests.tools.check_data_moves /tmp/snap/old/capeval.sqlite3 \\
        /tmp/snap/new/capeval.sqlite3

It prints what it compared and exits 1 on any difference. The suite's migration tests
(``test_migration_caption_spec.py``, ``test_thumb_raters.py``) do the same on rows of their
own, forward and back, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter


def caption_moves(old: sqlite3.Connection, new: sqlite3.Connection) -> tuple[Counter, list]:
    rows = old.execute(
        "SELECT id, purpose, prime_ratings, truth, explanation FROM annotation_caption"
    ).fetchall()
    specs = dict(new.execute("SELECT id, spec FROM annotation_caption"))
    counts, wrong = Counter(), []
    if set(specs) != {row[0] for row in rows}:
        wrong.append("the caption ids differ")
    for pk, purpose, primes, truth, explanation in rows:
        expected = {}
        if json.loads(primes):
            expected["prime_ratings"] = json.loads(primes)
        if truth is not None:
            expected["truth"] = truth
        if explanation:
            expected["explanation"] = explanation
        counts["captions"] += 1
        counts.update(f"{purpose} {key}" for key in expected)
        if json.loads(specs.get(pk, "{}")) != expected:
            wrong.append(f"caption {pk}: {expected} became {specs.get(pk)}")
    return counts, wrong


def rater_moves(old: sqlite3.Connection, new: sqlite3.Connection) -> tuple[Counter, list]:
    before = dict(old.execute("SELECT id, native_english FROM annotation_user"))
    after = dict(new.execute("SELECT user_id, native_english FROM capeval_thumb_rater"))
    counts, wrong = Counter(users=len(before), native_before=sum(map(bool, before.values()))), []
    for pk, native in before.items():
        # No Rater row reads as "not a native speaker", as for every account made later.
        if bool(after.get(pk, False)) != bool(native):
            wrong.append(f"user {pk}: native_english {bool(native)} became {after.get(pk)}")
    counts["rater_rows"] = len(after)
    return counts, wrong


def main(old_path: str, new_path: str) -> int:
    old, new = sqlite3.connect(old_path), sqlite3.connect(new_path)
    wrong = []
    for name, check in (("captions", caption_moves), ("THumB raters", rater_moves)):
        counts, problems = check(old, new)
        print(f"{name}: {dict(sorted(counts.items()))}; differences: {len(problems)}")
        wrong += problems
    for problem in wrong[:20]:
        print(" ", problem)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
