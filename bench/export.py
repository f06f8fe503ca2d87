"""Benchmark: our CSV export of 1,000,000 judgments against PostgreSQL's own COPY.

Not a test. It needs a local PostgreSQL server (loopback) and takes a few minutes:

    .venv/bin/python bench/export.py [--rows 1000000] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench]

1. (Re)creates the scratch database, migrates it with ``manage.py migrate`` and fills it
   in SQL (``INSERT ... SELECT generate_series``): 20,000 images, 5 captions each, one
   item per caption, 10,000 crowd participants and ``--rows`` judgments with assignments.
2. Baseline: ``COPY (SELECT <the export's columns and joins>) TO STDOUT WITH CSV`` of the
   same judgments, written to a file by psycopg.
3. Ours: ``services.runner.job_run`` of an export job (``exports.export_run``: chunked,
   neutralised, with the datasheet) in a subprocess, whose peak resident memory (VmHWM)
   it reports.

Prints rows/s of both, their ratio and the peak memory, and writes a JSON result to
``bench/results/`` (git-ignored). Targets: ours >= 0.5 x COPY, peak memory < 200 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
IMAGES = 20_000
CAPTIONS_PER_IMAGE = 5
PARTICIPANTS = 10_000
MODE = "bench-export"
TARGET_RATIO = 0.5
TARGET_PEAK_MB = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="capeval_bench")
    parser.add_argument("--reuse", action="store_true", help="measure again on the filled database")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    database_url = f"{args.server.rstrip('/')}/{args.database}"
    if args.child is not None:
        print(json.dumps(run_our_export(study_id=args.child)))
        return

    import psycopg

    env = {**os.environ, "DATABASE_URL": database_url}
    if args.reuse:
        with psycopg.connect(database_url) as conn:
            study_id, count = conn.execute(
                "SELECT study_id, count(*) FROM annotation_judgment GROUP BY study_id"
            ).fetchone()
        if count != args.rows:
            raise SystemExit(f"{args.database} holds {count:,} judgments, not {args.rows:,}")
    else:
        print(f"Preparing {args.database} with {args.rows:,} judgments ...", flush=True)
        started = time.perf_counter()
        recreate_database(args.server, args.database)
        subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "migrate", "--no-input", "-v", "0"],
            env=env,
            check=True,
            cwd=REPO,
        )
        with psycopg.connect(database_url, autocommit=True) as conn:
            study_id = fill(conn, args.rows)
        print(f"  prepared in {time.perf_counter() - started:.0f} s", flush=True)

    with tempfile.TemporaryDirectory(prefix="capeval-bench-") as folder:
        baseline = run_copy(database_url, study_id, Path(folder) / "copy.csv")
        print(
            f"COPY:  {baseline['rows']:,} rows in {baseline['seconds']:.2f} s "
            f"= {baseline['rows_per_s']:,.0f} rows/s ({baseline['mb']:.0f} MB)",
            flush=True,
        )
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(study_id),
                "--server",
                args.server,
                "--database",
                args.database,
            ],
            env={**env, "CAPEVAL_VAR_DIR": folder},
            check=True,
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        ours = json.loads(child.stdout.strip().splitlines()[-1])
    ours["children_max_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    ratio = ours["rows_per_s"] / baseline["rows_per_s"]
    print(
        f"Ours:  {ours['rows']:,} rows in {ours['seconds']:.2f} s "
        f"= {ours['rows_per_s']:,.0f} rows/s ({ours['mb']:.0f} MB)"
    )
    print(f"Ratio: {ratio:.2f} x COPY (target >= {TARGET_RATIO})")
    print(
        f"Peak memory of the export process: {ours['peak_rss_mb']:.0f} MB "
        f"(target < {TARGET_PEAK_MB} MB)"
    )
    result = {
        "benchmark": "export",
        "at": datetime.now(UTC).isoformat(),
        "rows": args.rows,
        "copy": baseline,
        "ours": ours,
        "ratio": ratio,
        "targets": {"ratio": TARGET_RATIO, "peak_rss_mb": TARGET_PEAK_MB},
        "met": ratio >= TARGET_RATIO and ours["peak_rss_mb"] < TARGET_PEAK_MB,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"export-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"Wrote {out.relative_to(REPO)}")


def recreate_database(server: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def fill(conn, rows: int) -> int:
    """Insert the synthetic study in SQL; return its id."""
    run = conn.execute
    owner = run(
        "INSERT INTO annotation_user (password, is_superuser, username, first_name, last_name,"
        " email, is_staff, is_active, date_joined, is_researcher, native_english)"
        " VALUES ('!', false, 'bench', '', '', '', false, true, now(), true, false)"
        " RETURNING id"
    ).fetchone()[0]
    study = run(
        "INSERT INTO annotation_study (name, description, mode, status, settings, seed,"
        " owner_id, public_id, created_at, updated_at)"
        " VALUES ('Export benchmark', '', %s, 'live', '{}', 1, %s, gen_random_uuid(), now(),"
        " now()) RETURNING id",
        [MODE, owner],
    ).fetchone()[0]
    run(
        "INSERT INTO annotation_image (study_id, name, sha256, file, display, width, height,"
        " format, alt_text, source)"
        " SELECT %s, 'img' || g || '.jpg', md5(g::text) || md5((g + 1)::text), 'o/' || g,"
        " 'd/' || g, 640, 480, 'JPEG', '', '' FROM generate_series(1, %s) g",
        [study, IMAGES],
    )
    # Every 50th caption is formula-like text, so the CSV neutralisation has work to do.
    run(
        "INSERT INTO annotation_caption (study_id, image_id, system, raw_text, text, purpose,"
        " prime_ratings, metrics, truth, explanation, line)"
        " SELECT %s, i.id, CASE WHEN k = 0 THEN 'Human' ELSE 'model-' || k END,"
        ' CASE WHEN (i.id + k) %% 50 = 0 THEN \'=HYPERLINK("http://x","y")\''
        "  ELSE 'a person riding a bike down the street number ' || i.id || '-' || k END,"
        ' CASE WHEN (i.id + k) %% 50 = 0 THEN \'=HYPERLINK("http://x","y").\''
        "  ELSE 'A person riding a bike down the street number ' || i.id || '-' || k || '.' END,"
        " 'study', '[]', '{}', NULL, '', 0"
        " FROM annotation_image i CROSS JOIN generate_series(0, %s) k WHERE i.study_id = %s",
        [study, CAPTIONS_PER_IMAGE - 1, study],
    )
    run(
        "INSERT INTO annotation_item (study_id, kind, image_id, position, spec, target,"
        " judgment_count, open_lease_count)"
        " SELECT %s, 'game', c.image_id, row_number() OVER (ORDER BY c.id),"
        " jsonb_build_object('caption_ids', jsonb_build_array(c.id)), 100, 10, 0"
        " FROM annotation_caption c WHERE c.study_id = %s",
        [study, study],
    )
    run(
        "INSERT INTO annotation_participant (study_id, user_id, source, external_id,"
        " external_meta, pseudonym, status, state, created_at)"
        " SELECT %s, NULL, 'prolific', 'PID' || g, '{}', 'P-' || lpad(to_hex(g), 8, '0'),"
        " 'active', '{}', now() FROM generate_series(1, %s) g",
        [study, PARTICIPANTS],
    )
    items = IMAGES * CAPTIONS_PER_IMAGE
    run(
        "INSERT INTO annotation_assignment (participant_id, item_id, round, token, status,"
        " served_at, expires_at, submitted_at, state)"
        " SELECT p.ids[1 + g %% %s], it.ids[1 + g %% %s], g / %s, 't' || g, 'submitted',"
        " t.at, t.at + interval '30 minutes', t.at + interval '5 seconds', '{}'"
        " FROM generate_series(0, %s - 1) g,"
        " (SELECT array_agg(id ORDER BY id) ids FROM annotation_participant"
        "  WHERE study_id = %s) p,"
        " (SELECT array_agg(id ORDER BY id) ids FROM annotation_item WHERE study_id = %s) it,"
        " LATERAL (SELECT timestamptz '2025-01-01' + g * interval '1 second' AS at) t",
        [PARTICIPANTS, items, items, rows, study, study],
    )
    run(
        "INSERT INTO annotation_judgment (study_id, item_id, participant_id, assignment_id,"
        " part, phase, payload, result, dwell_ms, excluded, exclusion_reason, created_at)"
        " SELECT %s, a.item_id, a.participant_id, a.id, 0, 'game',"
        " jsonb_build_object('rating', 1 + a.id %% 5, 'comment',"
        "  CASE WHEN a.id %% 97 = 0 THEN '-2+3 looks odd' ELSE 'fine' END),"
        " jsonb_build_object('points', a.id %% 5 - 2, 'consensus', 2.5 + (a.id %% 3) * 0.5),"
        " 3000 + a.id %% 5000, a.id %% 53 = 0,"
        " CASE WHEN a.id %% 53 = 0 THEN 'failed attention check' ELSE '' END, a.submitted_at"
        " FROM annotation_assignment a ORDER BY a.id",
        [study],
    )
    run("ANALYZE")
    return study


# The same columns and joins as the export (captions aggregated per item, as the export's
# item cache does), formatted by PostgreSQL.
COPY_SQL = """
COPY (
  WITH shown AS (
    SELECT i.id AS item_id,
           jsonb_agg(c.id ORDER BY e.ord) AS ids,
           jsonb_agg(c.system ORDER BY e.ord) AS systems,
           jsonb_agg(c.text ORDER BY e.ord) AS texts,
           jsonb_agg(c.raw_text ORDER BY e.ord) AS raw_texts
    FROM annotation_item i
    CROSS JOIN LATERAL jsonb_array_elements_text(i.spec -> 'caption_ids')
      WITH ORDINALITY AS e(caption_id, ord)
    JOIN annotation_caption c ON c.id = e.caption_id::bigint
    WHERE i.study_id = {study}
    GROUP BY i.id
  )
  SELECT s.id, s.name, s.mode, j.id, i.id, i.kind, i.position, im.name, im.sha256,
         sh.ids, sh.systems, sh.texts, sh.raw_texts, p.pseudonym, j.phase, j.part,
         j.payload -> 'comment', j.payload -> 'rating', j.result -> 'consensus',
         j.result -> 'points', j.created_at, a.served_at, a.submitted_at, j.dwell_ms,
         j.excluded, j.exclusion_reason
  FROM annotation_judgment j
  JOIN annotation_study s ON s.id = j.study_id
  JOIN annotation_item i ON i.id = j.item_id
  LEFT JOIN annotation_image im ON im.id = i.image_id
  LEFT JOIN shown sh ON sh.item_id = i.id
  JOIN annotation_participant p ON p.id = j.participant_id
  JOIN annotation_assignment a ON a.id = j.assignment_id
  WHERE j.study_id = {study}
  ORDER BY j.id
) TO STDOUT WITH (FORMAT csv, HEADER)
"""


def run_copy(database_url: str, study_id: int, path: Path) -> dict:
    import psycopg

    with psycopg.connect(database_url) as conn, conn.cursor() as cursor:
        started = time.perf_counter()
        with path.open("wb") as out, cursor.copy(COPY_SQL.format(study=int(study_id))) as copy:
            for block in copy:
                out.write(block)
        seconds = time.perf_counter() - started
        rows = cursor.rowcount
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "mb": path.stat().st_size / 1e6,
    }


def run_our_export(*, study_id: int) -> dict:
    """In the child process: run an export job of the study through the job runner."""
    sys.path[:0] = [str(REPO), str(REPO / "platform")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    import django

    django.setup()
    from django.conf import settings

    from annotation.models import Job, Study
    from annotation.modes import Mode, register
    from annotation.services.runner import job_run

    @register
    class BenchExportMode(Mode):
        name = MODE

    job = Job.objects.create(
        kind=Job.Kind.EXPORT, study=Study.objects.get(pk=study_id), params={"format": "csv"}
    )
    started = time.perf_counter()
    cpu_started = time.process_time()
    job_run(job=job)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    job.refresh_from_db()
    if job.status != Job.Status.DONE:
        raise SystemExit(f"export failed: {job.error}")
    path = Path(settings.CAPEVAL_EXPORT_DIR) / job.result_file
    rows = job.result["rows"]
    return {
        "rows": rows,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "rows_per_s": rows / seconds,
        "mb": path.stat().st_size / 1e6,
        "peak_rss_mb": peak_rss_mb(),
    }


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
