"""The arena report's figures (issue 46, row 7): a leaderboard plot with intervals, the
matrices in rank order, and cell labels readable on every cell.

A new user saw black labels on the dark cells of both matrices, systems in alphabetical
order, and no plot of the leaderboard. The contrast is computed here from the colour map
value of each cell (WCAG 2's formula, written out below), never from pixels.
"""

from __future__ import annotations

import itertools

import pytest
from django.urls import reverse

from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.factories.arena import MODE, arena_study, judge, shown_left, worker

pytestmark = pytest.mark.django_db

# Alphabetical order is the reverse of quality: a figure in alphabetical order fails.
QUALITY = {"alpha": 0, "beta": 1, "gamma": 2}


def wcag_luminance(rgb) -> float:
    def channel(c):
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one, two) -> float:
    high, low = sorted((wcag_luminance(one), wcag_luminance(two)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.fixture
def report(researcher):
    """A report in which gamma beats beta beats alpha (the better system usually wins)."""
    study = arena_study(
        researcher,
        systems=tuple(QUALITY),
        images=12,
        catch_rate=0,
        battle_target=3,
        bootstrap_rounds=50,
    )

    answers = itertools.count()

    def better(lease):
        spec = lease.item.spec
        winner = "a" if QUALITY[spec["system_a"]] > QUALITY[spec["system_b"]] else "b"
        # A quarter of the answers go the other way, so every cell has a value (counted,
        # not by lease id: ids move with whatever ran before in the database).
        if next(answers) % 4 == 0:
            winner = "b" if winner == "a" else "a"
        return "a" if winner == shown_left(lease) else "b"

    for person in [worker(study, f"w-figures-{k}") for k in range(3)]:
        while judge(person, better)[0] is not None:
            pass
    job = report_request(study=study, user=researcher)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return study, job.result


def ranked(result) -> list[str]:
    return [row["system"] for row in sorted(result["leaderboard"], key=lambda r: -r["score"])]


@pytest.mark.parametrize("name", ["win-rate", "battle-count"])
def test_every_cell_label_contrasts_with_its_cell(report, name):
    from matplotlib.colors import to_rgb

    _, result = report
    figure = MODE.report.figure(name, result)
    axes = figure.axes[0]
    image = axes.images[0]
    rows = [t.get_text() for t in axes.get_yticklabels()]
    cols = [t.get_text() for t in axes.get_xticklabels()]
    systems = result["matrices"]["systems"]
    key = "win_rate" if name == "win-rate" else "battles"
    labels = [t for t in axes.texts]
    assert len(labels) >= 6
    worst = min(
        contrast(
            to_rgb(label.get_color()),
            image.cmap(
                image.norm(
                    result["matrices"][key][systems.index(rows[round(label.get_position()[1])])][
                        systems.index(cols[round(label.get_position()[0])])
                    ]
                )
            ),
        )
        for label in labels
    )
    assert worst >= 4.5, f"a cell label of {name} has contrast {worst:.2f}:1"


@pytest.mark.parametrize("name", ["win-rate", "battle-count"])
def test_the_matrices_list_systems_in_rank_order(report, name):
    _, result = report
    axes = MODE.report.figure(name, result).axes[0]

    assert [t.get_text() for t in axes.get_yticklabels()] == ranked(result)
    assert [t.get_text() for t in axes.get_xticklabels()] == ranked(result)


def test_the_leaderboard_plot_shows_each_score_and_interval_best_first(client, researcher, report):
    study, result = report
    client.force_login(researcher)
    response = client.get(reverse("report_figure", args=[study.pk, "leaderboard", "svg"]))
    assert response.status_code == 200 and b"<svg" in response.content
    assert "leaderboard" in client.get(reverse("study_report", args=[study.pk])).content.decode()

    axes = MODE.report.figure("leaderboard", result).axes[0]
    names = [t.get_text() for t in axes.get_yticklabels()]
    # Best on top: the y axis runs downwards.
    top_first = names if axes.yaxis_inverted() else names[::-1]
    assert top_first == ranked(result)
    # The points and the bars are the table's scores and intervals.
    line, _, (bars,) = axes.containers[0]
    by_system = {row["system"]: row for row in result["leaderboard"]}
    for (x, y), segment in zip(line.get_xydata(), bars.get_segments(), strict=True):
        row = by_system[names[round(y)]]
        assert x == pytest.approx(row["score"])
        assert sorted(p[0] for p in segment) == pytest.approx([row["ci_low"], row["ci_high"]])
