"""Studies that can finish (issue 26, row 6): the dashboard and the planner warn when the
remaining items need more distinct workers than the study can get, with the number needed
and how to fix it, and show no estimated end then.

Through the real views (Django test client) and services; the bound itself is tested
against a brute-force assignment in tests/rubrics/test_capacity.py, and here once more on a
real study's remaining groups.
"""

import json
import zipfile
from collections import defaultdict

import pytest
from django.urls import reverse

from annotation.models import Item, ItemImage, Participant
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from annotation.services.exports import export_file
from annotation.services.participants import participant_for_user
from annotation.services.studies import study_close
from tests.factories.arena import arena_study
from tests.factories.core import vehicle_study
from tests.factories.humanr import crowd, do_group, humanr_study
from tests.factories.spans import judge as spans_judge
from tests.factories.spans import spans_study
from tests.factories.spans import worker as spans_worker
from tests.factories.thumb import thumb_study
from tests.factories.vicr import in_game, play, vicr_study
from tests.rubrics.test_capacity import brute_force_min_new

pytestmark = pytest.mark.django_db


def dashboard(client, study):
    response = client.get(reverse("study_dashboard", args=[study.pk]))
    assert response.status_code == 200
    return response.content.decode()


def row_6_study(researcher, make_user, annotators=2):
    """Issue 26 row 6: HUMANr, 18 images with a Human-vs-Human and two model comparisons
    each (54 comparisons: 6 groups of 9 and a check), registered annotators only."""
    study = humanr_study(researcher, images=18, systems=("GIT", "ClipCap"))
    people = [make_user(f"lab{k}") for k in range(annotators)]
    study.annotators.add(*people)
    return study, people


def work_until_stalled(study, people) -> list[int]:
    """Each annotator does every group they are offered; the groups each finished."""
    done = []
    for user in people:
        participant = participant_for_user(study=study, user=user)
        count = 0
        while assignment_next(participant=participant) is not None:
            do_group(participant)
            count += 1
        done.append(count)
    return done


def remaining_groups(study):
    """(images, slots left) of the groups with room left, from the stored rows."""
    images = defaultdict(set)
    for item_id, image_id in ItemImage.objects.filter(item__study=study).values_list(
        "item_id", "image_id"
    ):
        images[item_id].add(image_id)
    return [
        (images[item.pk], item.target - item.judgment_count - item.open_lease_count)
        for item in Item.objects.filter(study=study)
        if item.target > item.judgment_count + item.open_lease_count
    ]


def test_row_6_two_annotators_stall_and_the_dashboard_says_so(client, researcher, make_user):
    study, people = row_6_study(researcher, make_user)
    assert Item.objects.filter(study=study).count() == 6

    assert work_until_stalled(study, people) == [1, 1], "the row 6 stall: one group each"

    client.force_login(researcher)
    html = dashboard(client, study)
    # Neither annotator can take a remaining group (assignment_next gave them none), so
    # every slot needs a new worker: the groups showing one image need one each. By hand
    # from the stored rows: the most remaining groups that show one image.
    groups = remaining_groups(study)
    assert len(groups) == 4
    per_image = defaultdict(int)
    for images, left in groups:
        for image in images:
            per_image[image] += left
    expected = max(per_image.values())
    # The bound never exceeds the true minimum (a brute-force assignment of the 4 groups).
    assert expected <= brute_force_min_new(groups, [])
    assert "This study cannot finish with the workers it has" in html
    assert f"At least {expected} more distinct workers are needed." in html
    assert "none of the 2 participants so far can still take one" in html
    assert f"add at least {expected} annotators" in html
    assert reverse("study_people", args=[study.pk]) in html
    assert "share the crowd link" in html
    # Two groups were just finished, so the old dashboard promised an end here.
    assert '<dd class="eta">none: cannot finish</dd>' in html
    assert "At the last hour&#x27;s pace" not in html and "At the last hour's pace" not in html


def test_before_anyone_starts_the_annotators_are_counted(client, researcher, make_user):
    # Every image is in 3 groups (Human-vs-Human, GIT, ClipCap), each to a different
    # worker: 3 workers at least; 2 annotators are 1 short.
    study, _ = row_6_study(researcher, make_user)
    client.force_login(researcher)
    html = dashboard(client, study)
    assert "At least 3 more distinct workers are needed." in html
    assert "The study has 2 registered annotators who have not started and no crowd worker" in html
    assert "add at least 1 annotator on the" in html


def test_enough_annotators_no_warning(client, researcher, make_user):
    study, _ = row_6_study(researcher, make_user, annotators=3)
    client.force_login(researcher)
    html = dashboard(client, study)
    assert "cannot finish" not in html
    assert "Workers the remaining items need" in html
    assert "3 registered annotators have not started yet: enough if they take part." in html


def test_a_crowd_link_in_use_can_bring_the_workers(client, researcher, make_user):
    study, _ = row_6_study(researcher, make_user)
    crowd(study, "PID-1")
    client.force_login(researcher)
    # The polled dashboard does not compute the bound once the crowd link is in use (the
    # study can get the workers), the planner still states it.
    html = dashboard(client, study)
    assert "cannot finish" not in html and 'id="workers-needed"' not in html
    plan = client.get(reverse("study_plan", args=[study.pk])).content.decode()
    assert "cannot finish" not in plan
    # Every image in 3 groups; the crowd worker, who met nothing yet, can take one: 2 more.
    assert "At least 2 more distinct workers are needed." in plan
    assert "Crowd workers arrive through the crowd link" in plan


def test_a_closed_study_and_a_mode_without_the_constraint_show_nothing(
    client, researcher, make_user
):
    study, _ = row_6_study(researcher, make_user)
    study_close(study=study)
    client.force_login(researcher)
    assert 'id="workers-needed"' not in dashboard(client, study)
    other = vehicle_study(researcher, captions=3, target=2)
    assert get_mode(other.mode).workers_needed(other) is None
    assert 'id="workers-needed"' not in dashboard(client, other)


def test_the_planner_shows_the_workers_needed(client, researcher, make_user):
    study, _ = row_6_study(researcher, make_user)
    client.force_login(researcher)
    response = client.get(reverse("study_plan", args=[study.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "This study cannot finish with the workers it has" in html
    assert "At least 3 more distinct workers are needed." in html


def test_vicr_each_caption_needs_its_ratings_from_different_players(client, researcher, make_user):
    # 4 game captions, 3 ratings each (max_ratings), at least 2 (min_ratings): 3 players.
    study = vicr_study(researcher, game=4, max_ratings=3, min_ratings=2)
    study.annotators.add(make_user("lab"))
    need = get_mode("vicr").workers_needed(study)
    assert need.needed == 3
    assert "for the minimum of 2 ratings per caption, 2 more players would do" in need.reason
    client.force_login(researcher)
    html = dashboard(client, study)
    assert "At least 3 more distinct workers are needed." in html
    assert "add at least 2 annotators" in html

    # Two players in the game rate every caption: each caption still needs 1 rating, from
    # neither of them (they rated it): 1 more player.
    first, second = in_game(study), in_game(study)
    for _ in range(4):
        play(first, 3)
        play(second, 3)
    assert get_mode("vicr").workers_needed(study).needed == 1
    # A player excluded by the gates counts for nothing, nor does their rating.
    Participant.objects.filter(pk=second.pk).update(status="excluded")
    assert get_mode("vicr").workers_needed(study).needed == 1


def test_vicr_a_rating_by_an_excluded_player_leaves_room_for_the_others(researcher):
    # 4 captions, 3 ratings each. Two players rate all 4 (2 ratings each), a third rates the
    # 2 least-rated (now full). The 2 open captions need 1 rating each.
    study = vicr_study(researcher, game=4, max_ratings=3, min_ratings=2)
    first, second, third = in_game(study), in_game(study), in_game(study)
    for _ in range(4):
        play(first, 3)
        play(second, 3)
    play(third, 3)
    play(third, 3)
    # All three still in: the open captions were rated by the first two, the third can
    # give one to each: nobody more needed (the bound is 0, so the mode says so).
    assert get_mode("vicr").workers_needed(study).needed == 0
    # The first is excluded: the second rated the open captions, the third did not and
    # can still rate both: 0 more (counting the excluded player's rating as one of the
    # players' would say 1).
    Participant.objects.filter(pk=first.pk).update(status="excluded")
    assert get_mode("vicr").workers_needed(study).needed == 0
    # The third is excluded too: only the second is left, who rated them: 1 more.
    Participant.objects.filter(pk=third.pk).update(status="excluded")
    assert get_mode("vicr").workers_needed(study).needed == 1


# ------------------------------------------------------------------- row 20: the card


def test_humanr_dataset_card_states_the_real_group_sizes(researcher, tmp_path):
    # 8 images, 1 model: 16 comparisons, so no full group of 9 comparisons and a check;
    # the sizes come from the stored groups, counted here independently.
    study = humanr_study(researcher, images=8, humans=3, systems=("GIT",))
    sizes = defaultdict(int)
    for spec in Item.objects.filter(study=study).values_list("spec", flat=True):
        sizes[len(spec["trials"])] += 1
    assert 10 not in sizes, "the study must have short groups for this test to mean anything"
    do_group(crowd(study, "PID-1"))
    path = tmp_path / "humanr.zip"

    export_file(study=study, path=path, export_format="dataset")

    with zipfile.ZipFile(path) as archive:
        card = archive.read("README.md").decode()
        sheet = json.loads(archive.read("datasheet.json"))
    listed = " and ".join(
        f"{n} of {size} trials" for size, n in sorted(sizes.items(), reverse=True)
    )
    total = sum(sizes.values())
    note = f"Groups in this study: {total} groups, {listed}, each with one attention check"
    assert note in card
    assert sheet["protocol_notes"][0].startswith(note)
    protocol = card.split("## Protocol", 1)[1].split("## Collection", 1)[0]
    assert note in protocol


# ------------------------------------------------------------------- the other modes


def test_spans_each_caption_needs_target_annotators(client, researcher, make_user):
    # 2 images x 2 systems = 4 captions, each marked by 3 different annotators: 3 workers.
    study = spans_study(researcher, images=2, target=3)
    assert get_mode("spans").workers_needed(study).needed == 3
    study.annotators.add(make_user("lab1"), make_user("lab2"))
    client.force_login(researcher)
    html = dashboard(client, study)
    assert "This study cannot finish with the workers it has" in html
    assert "Each caption is marked by different annotators: a caption still needs 3" in html
    assert "add at least 1 annotator on the" in html
    # One worker marks one caption: the 3 untouched captions still need 3 each, and the one
    # worker can give one to each of them: 2 more.
    spans_judge(spans_worker(study), lambda lease, text: {"spans": "[]", "score": 80})
    assert get_mode("spans").workers_needed(study).needed == 2


def test_arena_battles_of_one_image_go_to_different_workers(researcher):
    study = arena_study(researcher, images=4, battle_target=2)
    per_image = defaultdict(int)
    for image_id, target in Item.objects.filter(study=study, kind="battle").values_list(
        "image_id", "target"
    ):
        per_image[image_id] += target
    assert get_mode("arena").workers_needed(study).needed == max(per_image.values())


def test_thumb_stages_of_one_image_go_to_different_annotators(make_study):
    # Stage 1 and the review of each image: 2 different annotators (the check is made later).
    study = thumb_study(make_study)
    need = get_mode("thumb").workers_needed(study)
    assert need.needed == 2
    assert need.reason.startswith("Each stage of an image goes to a different annotator")
