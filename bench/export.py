"""Benchmark: the export of a real study of each mode against PostgreSQL's own COPY.

Not a test. It needs a local PostgreSQL server (loopback) and takes several minutes:

    .venv/bin/python bench/export.py [--rows 1000000] [--modes thumb,vicr,humanr] \
        [--formats csv,parquet,jsonl,dataset] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_export]

1. (Re)creates the scratch database (dropped first!), migrates it, and fills one study per
   real mode in SQL (``INSERT ... SELECT generate_series``) with the payloads and results
   the modes store, ``--rows`` rows of each mode's export table: THumB caption rows (5
   captions per image, stage 1 and stage 2, so rows / 5 judgments), VICR game ratings,
   HUMANr trials (groups of 10). Every 50th caption is formula-like, every 997th holds a
   line separator (U+2028), so neutralisation and escaping have work to do. Every caption
   holds four metric scores (the dataset format's ``caption_metrics`` table).
2. Baseline: ``COPY (<the mode's export query>) TO STDOUT WITH (FORMAT csv, HEADER)`` of
   the same rows and columns, written to a file by psycopg; the best of two runs.
3. Ours, per format: ``services.runner.job_run`` of an export job (the Celery task's code
   path without the broker) in a fresh subprocess, whose peak resident memory (VmHWM) it
   reports, and the wall and CPU seconds of its work after ``django.setup()`` (the export
   path's imports and the job). The sources are compiled first, as the image does.
4. Small: a VICR study of Flickr8k-Expert's size (16,992 ratings: 1,132 images, 5,660
   pairs x 3), COPY and CSV the same way, in the same run.

Prints rows/s of each, the ratio to COPY and the peak memory, and writes a JSON result to
``bench/results/``. Targets: CSV >= 0.5 x and Parquet >= 0.6 x COPY on every mode, peak
memory < 200 MB on every mode and format, the small CSV in < 1 s after Django's start. No
mode is registered here: the studies are the real modes (THumB, VICR, HUMANr, the arena,
error spans), filled in SQL with the payloads and results each stores.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import DEFAULT_SERVER, REPO, load_average, now_iso, prepare_database, write_result

MODES = ("thumb", "vicr", "humanr", "arena", "spans")
FORMATS = ("csv", "parquet", "jsonl", "dataset")
PARTICIPANTS = 10_000
TARGET_RATIO = 0.5
TARGET_PARQUET_RATIO = 0.6
SMALL_ROWS = 16_992  # Flickr8k-Expert's VICR study
TARGET_SMALL_SECONDS = 1.0
TARGET_PEAK_MB = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_export")
    parser.add_argument("--small-rows", type=int, default=SMALL_ROWS)
    parser.add_argument("--child", nargs=2, metavar=("STUDY", "FORMAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_our_export(int(args.child[0]), args.child[1])))
        return
    modes = [m for m in args.modes.split(",") if m]
    formats = [f for f in args.formats.split(",") if f]
    unknown = set(modes) - set(MODES) or set(formats) - set(FORMATS)
    if unknown:
        raise SystemExit(f"unknown: {', '.join(sorted(unknown))}")

    print(f"Preparing {args.database} ...", flush=True)
    env = prepare_database(args.server, args.database)
    # The image compiles the sources at build (Dockerfile), so a worker never compiles
    # them per process; PYTHONDONTWRITEBYTECODE is set here too, so compile them once.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "annotation", "rubrics", "platform"],
        cwd=REPO,
        check=True,
    )
    results = {mode: measure(env, mode, args.rows, formats) for mode in modes}
    print(f"\nsmall: Flickr8k-Expert's size, {SMALL_ROWS:,} VICR ratings", flush=True)
    small = measure(env, "vicr", args.small_rows, ["csv"])
    small_csv = small["ours"]["csv"]
    print(
        f"  CSV: {small_csv['after_setup_seconds']:.2f} s of work after django.setup() "
        f"(imports {small_csv['import_seconds']:.2f} s, export {small_csv['seconds']:.2f} s; "
        f"CPU {small_csv['after_setup_cpu_seconds']:.2f} s), target < {TARGET_SMALL_SECONDS} s"
    )

    met = {
        mode: {
            "csv_ratio": r["ours"].get("csv", {}).get("ratio", 0) >= TARGET_RATIO,
            "parquet_ratio": r["ours"].get("parquet", {}).get("ratio", 0) >= TARGET_PARQUET_RATIO,
            "peak_memory": all(run["peak_rss_mb"] < TARGET_PEAK_MB for run in r["ours"].values()),
        }
        for mode, r in results.items()
    }
    write_result(
        "export",
        {
            "benchmark": "export",
            "at": now_iso(),
            "rows": args.rows,
            "modes": results,
            "small": small,
            "small_met": small_csv["after_setup_seconds"] < TARGET_SMALL_SECONDS,
            "targets": {
                "csv_ratio": TARGET_RATIO,
                "parquet_ratio": TARGET_PARQUET_RATIO,
                "small_seconds": TARGET_SMALL_SECONDS,
                "peak_rss_mb": TARGET_PEAK_MB,
            },
            "met": met,
            "cpus": os.cpu_count(),
            "load_average": load_average(),
        },
    )


def measure(env: dict[str, str], mode: str, rows: int, formats: list[str]) -> dict:
    """Fill a study of ``mode`` with ``rows`` rows, then COPY (best of two) and each format
    in a fresh process, the same rows."""
    import psycopg

    database_url = env["DATABASE_URL"]
    started = time.perf_counter()
    with psycopg.connect(database_url, autocommit=True) as conn:
        study_id = FILL[mode](conn, rows)
        conn.execute("ANALYZE")
    print(f"\n{mode}: study {study_id} filled in {time.perf_counter() - started:.0f} s")
    with tempfile.TemporaryDirectory(prefix="capeval-bench-") as folder:
        copies = [run_copy(database_url, study_id, Path(folder) / "copy.csv") for _ in "ab"]
        baseline = max(copies, key=lambda c: c["rows_per_s"])
        print(
            f"  COPY     {baseline['rows']:>9,} rows {baseline['seconds']:6.2f} s "
            f"{baseline['rows_per_s']:>9,.0f} rows/s"
        )
        ours = {}
        for export_format in formats:
            child = subprocess.run(
                [sys.executable, __file__, "--child", str(study_id), export_format],
                env={**env, "CAPEVAL_VAR_DIR": folder},
                check=True,
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            run = json.loads(child.stdout.strip().splitlines()[-1])
            run["ratio"] = run["rows_per_s"] / baseline["rows_per_s"]
            ours[export_format] = run
            print(
                f"  {export_format:<8} {run['rows']:>9,} rows {run['seconds']:6.2f} s "
                f"{run['rows_per_s']:>9,.0f} rows/s  {run['ratio']:.2f} x COPY  "
                f"peak {run['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    if ours.get("csv") and ours["csv"]["rows"] != baseline["rows"]:
        raise SystemExit(f"{mode}: CSV has {ours['csv']['rows']} rows, COPY {baseline['rows']}")
    return {"study": study_id, "copy": baseline, "copy_runs": copies, "ours": ours}


# ---------------------------------------------------------------------- filling


def _study(conn, mode: str, settings: str = "{}") -> int:
    owner = conn.execute(
        "INSERT INTO annotation_user (password, is_superuser, username, first_name, last_name,"
        " email, is_staff, is_active, date_joined, is_researcher)"
        " VALUES ('!', false, %s, '', '', '', false, true, now(), true)"
        " ON CONFLICT (username) DO UPDATE SET is_researcher = true RETURNING id",
        [f"bench-{mode}"],
    ).fetchone()[0]
    return conn.execute(
        "INSERT INTO annotation_study (name, description, mode, status, settings, seed,"
        " owner_id, public_id, completion_code, created_at, updated_at)"
        " VALUES (%s, 'Export benchmark', %s, 'live', %s, 1, %s, gen_random_uuid(),"
        " 'CBENCHSECRET', now(), now()) RETURNING id",
        [f"Export benchmark ({mode})", mode, settings, owner],
    ).fetchone()[0]


def _images_and_captions(conn, study: int, images: int, purpose: str = "study") -> None:
    """``images`` images with 5 captions each (Human and model-1..4), realistic texts."""
    conn.execute(
        "INSERT INTO annotation_image (study_id, name, sha256, file, display, width, height,"
        " format, alt_text, source)"
        " SELECT %s, 'COCO_val2014_' || lpad(g::text, 12, '0') || '.jpg',"
        " md5(g::text) || md5((g + 1)::text), 'o/' || g, 'd/' || g, 640, 480, 'JPEG', '', ''"
        " FROM generate_series(1, %s) g",
        [study, images],
    )
    conn.execute(
        "INSERT INTO annotation_caption (study_id, image_id, system, raw_text, text, purpose,"
        " spec, metrics, line)"
        " SELECT %s, i.id, CASE WHEN k = 0 THEN 'Human' ELSE 'model-' || k END,"
        " t.text, t.text || '.', %s, '{\"prime_ratings\": [3, 4]}',"
        # Four metric scores per caption, as the metric lab stores them (issue 26: the
        # dataset's caption_metrics table has a column each).
        " jsonb_build_object('BLEU-4 (sacrebleu)', (i.id * 7 + k) %% 100 / 1.7,"
        "  'ROUGE-L (rouge-score)', (i.id + k) %% 89 / 89.0,"
        "  'CIDEr (pycocoevalcap)', (i.id * 3 + k) %% 1000 / 97.0,"
        "  'METEOR 1.5 (pycocoevalcap)', (i.id + 3 * k) %% 71 / 71.0),"
        " i.id * 5 + k"
        " FROM annotation_image i CROSS JOIN generate_series(0, 4) k,"
        " LATERAL (SELECT CASE"
        '   WHEN (i.id + k) %% 50 = 0 THEN \'=HYPERLINK("http://x","y")\''
        "   WHEN (i.id + k) %% 997 = 0 THEN 'a man ' || chr(8232) || 'on a horse'"
        "   ELSE 'a person riding a bike down a busy street next to a red bus number '"
        "     || i.id || '-' || k END AS text) t"
        " WHERE i.study_id = %s ORDER BY i.id, k",
        [study, purpose, study],
    )


def _participants(conn, study: int, status: str, count: int = PARTICIPANTS) -> None:
    conn.execute(
        "INSERT INTO annotation_participant (study_id, user_id, source, external_id,"
        " external_meta, pseudonym, status, state, browser_id, address, network, flags,"
        " completed_at, created_at)"
        " SELECT %s, NULL, 'prolific', 'PID' || g, '{}', 'P-' || %s || '-' || g, %s, '{}',"
        " '', '192.0.2.1', '192.0.2.0/24', '[]', NULL, now() FROM generate_series(1, %s) g",
        [study, study, status, count],
    )


def fill_vicr(conn, rows: int) -> int:
    """Game ratings of 5 captions per image, 3 per caption at 16,992 rows (the size of
    Flickr8k-Expert's VICR study: 5,664 pairs x 3), 10 at 1M (20,000 images, the most)."""
    study = _study(conn, "vicr")
    _images_and_captions(conn, study, max(1, min(20_000, rows // 15)))
    conn.execute(
        "INSERT INTO annotation_item (study_id, kind, image_id, position, spec, target,"
        " judgment_count, open_lease_count)"
        " SELECT %s, 'game', c.image_id, row_number() OVER (ORDER BY c.id),"
        " jsonb_build_object('caption_id', c.id), 1000, 0, 0"
        " FROM annotation_caption c WHERE c.study_id = %s",
        [study, study],
    )
    _participants(conn, study, "game", min(PARTICIPANTS, max(10, rows // 100)))
    _assignments(conn, study, rows, parts=1)
    conn.execute(
        "INSERT INTO annotation_judgment (study_id, item_id, participant_id, assignment_id,"
        " part, payload, result, dwell_ms, excluded, exclusion_reason, created_at)"
        " SELECT %s, a.item_id, a.participant_id, a.id, 0,"
        " jsonb_build_object('rating', 1 + a.id %% 5),"
        " jsonb_build_object('points', a.id %% 3 - 1, 'consensus', 1 + a.id %% 5,"
        "  'pool_size', 2 + a.id %% 6, 'pool_human', a.id %% 6, 'pool_primed', 2,"
        "  'n', 2 + a.id %% 6, 'var', 0.25, 'v', 0.5, 'd', 1.0,"
        "  'reason', 'you matched the consensus', 'score_after', a.id %% 40,"
        "  'phase_after', 'game'),"
        " 3000 + a.id %% 5000, false, '', a.submitted_at"
        " FROM annotation_assignment a JOIN annotation_participant p ON p.id = a.participant_id"
        " WHERE p.study_id = %s ORDER BY a.id",
        [study, study],
    )
    return study


def fill_humanr(conn, rows: int) -> int:
    study = _study(conn, "humanr")
    _images_and_captions(conn, study, 20_000)
    groups = 10_000
    conn.execute(
        "INSERT INTO annotation_item (study_id, kind, image_id, position, spec, target,"
        " judgment_count, open_lease_count)"
        " SELECT %s, 'group', NULL, g, jsonb_build_object('group', g, 'short', false,"
        "  'seed', 1, 'trials', (SELECT jsonb_agg(jsonb_build_object('kind',"
        "   CASE WHEN t = 9 THEN 'attention_check' ELSE 'comparison' END,"
        "   'image_id', (g * 10 + t) %% 20000, 'system', 'model-' || (1 + t %% 4),"
        "   'reference_caption_id', 0, 'other_caption_id', 0)) FROM generate_series(0, 9) t)),"
        " 1000, 0, 0 FROM generate_series(0, %s - 1) g",
        [study, groups],
    )
    _participants(conn, study, "active")
    _assignments(conn, study, rows // 10, parts=10)
    conn.execute(
        "INSERT INTO annotation_judgment (study_id, item_id, participant_id, assignment_id,"
        " part, payload, result, dwell_ms, excluded, exclusion_reason, created_at)"
        " SELECT %s, a.item_id, a.participant_id, a.id, t,"
        " jsonb_build_object('raw', raw),"
        " jsonb_build_object('group', it.position, 'kind', tkind,"
        "  'comparison', CASE WHEN t < 9 THEN img || ':' || sys END, 'image_id', img,"
        "  'image_name', imn.name, 'system', CASE WHEN t < 9 THEN sys ELSE '' END,"
        "  'reference_caption_id', ref, 'other_caption_id', other,"
        "  'reference_on_left', on_left,"
        "  'left_caption_id', CASE WHEN on_left THEN ref ELSE other END,"
        "  'right_caption_id', CASE WHEN on_left THEN other ELSE ref END,"
        "  'left_system', CASE WHEN on_left THEN 'Human' ELSE sys END,"
        "  'right_system', CASE WHEN on_left THEN sys ELSE 'Human' END,"
        "  'oriented', CASE WHEN on_left THEN raw ELSE 10 - raw END,"
        "  'value', CASE WHEN t < 9 THEN ((CASE WHEN on_left THEN raw ELSE 10 - raw END) - 5)"
        "   / 4.0 END, 'check_failed', CASE WHEN t = 9 THEN raw >= 5 END),"
        " 2000 + (a.id * 10 + t) %% 7000, false, '', a.submitted_at + t * interval '5 seconds'"
        " FROM annotation_assignment a JOIN annotation_item it ON it.id = a.item_id"
        " CROSS JOIN generate_series(0, 9) t"
        # One INSERT wrote the captions image by image, Human first: ids are consecutive.
        " CROSS JOIN (SELECT min(id) AS first FROM annotation_caption WHERE study_id = %s) c"
        " CROSS JOIN (SELECT min(id) AS first FROM annotation_image WHERE study_id = %s) im"
        " CROSS JOIN LATERAL (SELECT (it.position * 10 + t) %% 20000 AS n,"
        "  1 + (a.id + t) %% 9 AS raw, (a.id + t) %% 2 = 0 AS on_left,"
        "  'model-' || (1 + t %% 4) AS sys,"
        "  CASE WHEN t = 9 THEN 'attention_check' ELSE 'comparison' END AS tkind) v"
        " CROSS JOIN LATERAL (SELECT im.first + v.n AS img, c.first + v.n * 5 AS ref,"
        "  c.first + v.n * 5 + 1 + t %% 4 AS other) h"
        " JOIN annotation_image imn ON imn.id = h.img"
        " WHERE it.study_id = %s ORDER BY a.id, t",
        [study, study, study, study],
    )
    return study


def fill_thumb(conn, rows: int) -> int:
    study = _study(conn, "thumb")
    images = max(1, rows // 10)  # 5 captions x 2 stages per image
    _images_and_captions(conn, study, images)
    conn.execute(
        "INSERT INTO annotation_item (study_id, kind, image_id, position, spec, target,"
        " judgment_count, open_lease_count)"
        " SELECT %s, s.kind, i.id, i.id, jsonb_build_object('image_name', i.name, 'groups',"
        "  (SELECT jsonb_agg(jsonb_build_object('key', 'c' || c.n, 'text', c.text, 'captions',"
        "    jsonb_build_array(jsonb_build_object('id', c.id, 'system', c.system,"
        "    'raw_text', c.raw_text))) ORDER BY c.n)"
        "   FROM (SELECT c.*, row_number() OVER (ORDER BY c.id) AS n FROM annotation_caption c"
        "    WHERE c.image_id = i.id) c)),"
        " 1, 1, 0 FROM annotation_image i CROSS JOIN (VALUES ('stage1'), ('stage2')) s(kind)"
        " WHERE i.study_id = %s ORDER BY i.id, s.kind",
        [study, study],
    )
    _participants(conn, study, "active", 1_000)
    _assignments(conn, study, images * 2, parts=1)
    # Stage 2 keeps stage 1's scores except recall of every third caption (+1, capped).
    conn.execute(
        "INSERT INTO annotation_judgment (study_id, item_id, participant_id, assignment_id,"
        " part, payload, result, dwell_ms, excluded, exclusion_reason, created_at)"
        " SELECT %s, a.item_id, a.participant_id, a.id, 0,"
        " jsonb_build_object('captions', (SELECT jsonb_object_agg(g ->> 'key',"
        "   jsonb_build_object('caption_ids', jsonb_build_array(g -> 'captions' -> 0 -> 'id'),"
        "   'precision', p, 'recall', r, 'fluency', f, 'fluency_errors',"
        "   CASE WHEN f > 0 THEN jsonb_build_object('casing', 0.1) ELSE '{}' END,"
        "   'conciseness', 0, 'inclusive', 0, 'total', (p + r) / 2.0 - f))"
        "  FROM jsonb_array_elements(it.spec -> 'groups') WITH ORDINALITY e(g, n),"
        "  LATERAL (SELECT 1 + (it.image_id + n) %% 5 AS p,"
        "   LEAST(5, 1 + (it.image_id + 2 * n) %% 5 + CASE WHEN it.kind = 'stage2' AND n %% 3 = 0"
        "   THEN 1 ELSE 0 END) AS r, CASE WHEN n = 2 THEN 0.1 ELSE 0 END AS f) s)),"
        " CASE WHEN it.kind = 'stage2' THEN jsonb_build_object('modified',"
        "  (SELECT jsonb_object_agg(g ->> 'key', jsonb_build_object('precision', false,"
        "   'recall', n %% 3 = 0, 'fluency', false, 'conciseness', false, 'inclusive', false))"
        "   FROM jsonb_array_elements(it.spec -> 'groups') WITH ORDINALITY e(g, n)))"
        "  ELSE '{}' END,"
        " 60000 + a.id %% 60000, false, '', a.submitted_at"
        " FROM annotation_assignment a JOIN annotation_item it ON it.id = a.item_id"
        " WHERE it.study_id = %s ORDER BY a.id",
        [study, study],
    )
    return study


def _assignments(conn, study: int, count: int, *, parts: int) -> None:
    """``count`` submitted leases, item by item in turn; the k-th pass over the items goes to
    the next participant, so nobody holds an item twice (at most as many passes as
    participants); served one second apart."""
    conn.execute(
        "INSERT INTO annotation_assignment (participant_id, item_id, round, token, status,"
        " served_at, expires_at, submitted_at, released_by)"
        " SELECT p.ids[1 + (g + g / cardinality(it.ids)) %% cardinality(p.ids)],"
        "  it.ids[1 + g %% cardinality(it.ids)],"
        "  0, 't' || %s || '-' || g, 'submitted',"
        "  at, at + interval '30 minutes', at + %s * interval '5 seconds', ''"
        " FROM generate_series(0, %s - 1) g,"
        " (SELECT array_agg(id ORDER BY id) ids FROM annotation_participant"
        "  WHERE study_id = %s) p,"
        " (SELECT array_agg(id ORDER BY id) ids FROM annotation_item WHERE study_id = %s) it,"
        " LATERAL (SELECT timestamptz '2025-01-01' + g * interval '1 second' AS at) t",
        [study, parts, count, study, study],
    )


def fill_arena(conn, rows: int) -> int:
    """Battles of two of the 5 systems of an image, one judgment each, with the criteria
    asked (ImageInWords' five) on every battle."""
    study = _study(conn, "arena")
    _images_and_captions(conn, study, 20_000)
    conn.execute(
        "INSERT INTO annotation_item (study_id, kind, image_id, position, spec, target,"
        " judgment_count, open_lease_count)"
        " SELECT %s, 'battle', a.image_id, row_number() OVER (ORDER BY a.id, b.id),"
        " jsonb_build_object('caption_a', a.id, 'caption_b', b.id, 'system_a', a.system,"
        "  'system_b', b.system), 1000, 0, 0"
        " FROM annotation_caption a JOIN annotation_caption b"
        "  ON b.image_id = a.image_id AND b.id = a.id + 1"
        " WHERE a.study_id = %s",
        [study, study],
    )
    _participants(conn, study, "active")
    _assignments(conn, study, rows, parts=1)
    conn.execute(
        "INSERT INTO annotation_judgment (study_id, item_id, participant_id, assignment_id,"
        " part, payload, result, dwell_ms, excluded, exclusion_reason, created_at)"
        " SELECT %s, a.item_id, a.participant_id, a.id, 0,"
        " jsonb_build_object('left', CASE WHEN a.id %% 2 = 0 THEN 'a' ELSE 'b' END,"
        "  'outcome', (ARRAY['a', 'b', 'tie', 'bothbad'])[1 + a.id %% 4]),"
        " jsonb_build_object('winner',"
        "  (ARRAY['model_a', 'model_b', 'tie', 'tie (bothbad)'])[1 + a.id %% 4],"
        "  'criteria', jsonb_build_object('comprehensiveness', a.id %% 5 - 2,"
        "   'specificity', (a.id + 1) %% 5 - 2, 'hallucination', (a.id + 2) %% 5 - 2,"
        "   'tldr', (a.id + 3) %% 5 - 2, 'human_like', (a.id + 4) %% 5 - 2),"
        "  'pair_probability', 0.1),"
        " 3000 + a.id %% 5000, false, '', a.submitted_at"
        " FROM annotation_assignment a JOIN annotation_participant p ON p.id = a.participant_id"
        " WHERE p.study_id = %s ORDER BY a.id",
        [study, study],
    )
    return study


def fill_spans(conn, rows: int) -> int:
    """One caption per item, one judgment each with two marked spans and an ESA score."""
    study = _study(conn, "spans")
    _images_and_captions(conn, study, 20_000)
    conn.execute(
        "INSERT INTO annotation_item (study_id, kind, image_id, position, spec, target,"
        " judgment_count, open_lease_count)"
        " SELECT %s, 'caption', c.image_id, row_number() OVER (ORDER BY c.id),"
        " jsonb_build_object('caption', c.id), 1000, 0, 0"
        " FROM annotation_caption c WHERE c.study_id = %s",
        [study, study],
    )
    _participants(conn, study, "active")
    _assignments(conn, study, rows, parts=1)
    conn.execute(
        "INSERT INTO annotation_judgment (study_id, item_id, participant_id, assignment_id,"
        " part, payload, result, dwell_ms, excluded, exclusion_reason, created_at)"
        " SELECT %s, a.item_id, a.participant_id, a.id, 0,"
        " jsonb_build_object('score', a.id %% 101, 'unusable', a.id %% 97 = 0,"
        "  'spans', jsonb_build_array("
        "   jsonb_build_object('start', 2, 'end', 7, 'text', 'man o', 'severity', 'minor',"
        "    'category', 'accuracy', 'note', '', 'omission', false),"
        "   jsonb_build_object('start', 0, 'end', 0, 'text', '', 'severity', 'major',"
        "    'category', 'omission', 'note', 'the bus', 'omission', true))),"
        " jsonb_build_object('minor', 1, 'major', 1, 'omissions', 1, 'weighted', 6.0),"
        " 20000 + a.id %% 20000, false, '', a.submitted_at"
        " FROM annotation_assignment a JOIN annotation_participant p ON p.id = a.participant_id"
        " WHERE p.study_id = %s ORDER BY a.id",
        [study, study],
    )
    return study


FILL = {
    "thumb": fill_thumb,
    "vicr": fill_vicr,
    "humanr": fill_humanr,
    "arena": fill_arena,
    "spans": fill_spans,
}


# ---------------------------------------------------------------------- measuring


def copy_sql(study_id: int) -> str:
    """COPY of the mode's own export query: the same rows, columns and joins."""
    import psycopg
    from django.db import connection

    from annotation.models import Study
    from annotation.modes import get_mode
    from annotation.modes.base import ExportSql

    study = Study.objects.get(pk=study_id)
    sql, params = get_mode(study.mode).export.query(study, ExportSql("postgresql"))
    connection.ensure_connection()
    with psycopg.ClientCursor(connection.connection) as cursor:
        return f"COPY ({cursor.mogrify(sql, params)}) TO STDOUT WITH (FORMAT csv, HEADER)"


def run_copy(database_url: str, study_id: int, path: Path) -> dict:
    import psycopg

    statement = copy_sql(study_id)
    with psycopg.connect(database_url) as conn, conn.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'UTC'")
        started = time.perf_counter()
        with path.open("wb") as out, cursor.copy(statement) as copy:
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


def run_our_export(study_id: int, export_format: str) -> dict:
    """In the child process: run an export job of the study through the job runner."""
    sys.path[:0] = [str(REPO), str(REPO / "platform")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    import django

    django.setup()
    # From here on: the work of an export beyond Django's start (what a worker process
    # that has just started pays): the export path's imports, then the job.
    setup_done = time.perf_counter()
    setup_cpu = time.process_time()
    from django.conf import settings

    from annotation.models import Job, Study
    from annotation.services.runner import job_run

    imported = time.perf_counter()
    job = Job.objects.create(
        kind=Job.Kind.EXPORT, study=Study.objects.get(pk=study_id), params={"format": export_format}
    )
    started = time.perf_counter()
    cpu_started = time.process_time()
    job_run(job=job)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    after_setup = time.perf_counter() - setup_done
    after_setup_cpu = time.process_time() - setup_cpu
    # Which code ran: this worktree's, not the editable install's (bench/README.md).
    import annotation

    source = str(Path(annotation.__file__).resolve().parents[1])
    job.refresh_from_db()
    if job.status != Job.Status.DONE:
        raise SystemExit(f"export failed: {job.error}")
    path = Path(settings.CAPEVAL_EXPORT_DIR) / job.result_file
    rows = job.result["rows"]
    return {
        "rows": rows,
        "judgments": job.result["judgments"],
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "import_seconds": imported - setup_done,
        "after_setup_seconds": after_setup,
        "after_setup_cpu_seconds": after_setup_cpu,
        "source": source,
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
