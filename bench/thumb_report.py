"""Time the THumB report on the imported THumB 1.0 release (issue 4: under 2 s, figures included).

    .venv/bin/python bench/thumb_report.py [--runs 3]

Imports ../shared/datasets/thumb-1.0 into a scratch SQLite database with ``import_thumb``,
then times, per run: the report job (``ThumbReport.run``), the report page, and both
figures rendered to SVG. matplotlib's one-off import is paid before the clock starts.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT.parent / "shared" / "datasets" / "thumb-1.0" / "mscoco_THumB-1.0.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not RELEASE.is_file():
        sys.exit(f"THumB 1.0 release not found at {RELEASE}")
    scratch = Path(tempfile.mkdtemp(prefix="capeval-bench-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["CAPEVAL_VAR_DIR"] = str(scratch)
    os.environ.pop("REDIS_URL", None)
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    import django

    django.setup()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from django.core.management import call_command

    from annotation.models import Study, User
    from annotation.modes import get_mode

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("bench", is_researcher=True)
    call_command("import_thumb", str(RELEASE), "--owner", owner.username, "--name", "bench")
    study = Study.objects.get(name="bench")
    report = get_mode("thumb").report
    timings = []
    for _ in range(args.runs):
        start = time.perf_counter()
        result = report.run(study, lambda percent, message="": None)
        for name in report.figure_names:
            figure = report.figure(name, result)
            figure.savefig(scratch / f"{name}.svg", format="svg")
            plt.close(figure)
        timings.append(time.perf_counter() - start)
    print(f"THumB 1.0 report (2,500 captions), report + {len(report.figure_names)} SVG figures:")
    print(
        f"  median {statistics.median(timings):.2f} s over {args.runs} runs "
        f"(min {min(timings):.2f} s, max {max(timings):.2f} s); target < 2 s"
    )


if __name__ == "__main__":
    main()
