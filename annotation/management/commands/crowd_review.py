"""Approve, reject or pay a bonus to a study's crowd workers from the command line, through
the same ledger as the review page (nothing is sent twice).

    manage.py crowd_review 12 --approve-complete --dry-run
    manage.py crowd_review 12 --approve-complete
    manage.py crowd_review 12 --reject-flagged --message "..."
    manage.py crowd_review 12 --bonus 0.50 --bonus-reason "quality bonus" --filter completed_clean
    manage.py crowd_review 12 --bonus-per-judgment 0.02 --bonus-reason "per kept judgment"

``--approve-complete`` approves the workers who completed with no integrity flag (the
filter ``completed_clean``); ``--reject-flagged`` rejects the flagged ones with a reason
written from their flags unless ``--message`` gives one.
"""

from django.core.management.base import BaseCommand, CommandError

from annotation.crowd import PlatformError
from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.crowd import review


class Command(BaseCommand):
    help = "Approve, reject or bonus a study's crowd workers (with --dry-run: show the plan)."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--approve-complete", action="store_true")
        which.add_argument("--reject-flagged", action="store_true")
        which.add_argument("--bonus", metavar="AMOUNT", help="Per worker, e.g. 0.50.")
        which.add_argument("--bonus-per-judgment", metavar="AMOUNT", help="Per kept judgment.")
        parser.add_argument("--filter", choices=list(review.FILTERS), default="")
        parser.add_argument("--bonus-reason", default="bonus")
        parser.add_argument("--message", default="", help="Rejection reason (100+ characters).")
        parser.add_argument("--category", choices=review.REJECT_CATEGORIES, default="FAILED_CHECK")
        parser.add_argument("--dry-run", action="store_true", help="Show the plan, send nothing.")

    def handle(self, *args, study_id: int, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        if options["approve_complete"]:
            action, default_filter = "approve", "completed_clean"
        elif options["reject_flagged"]:
            action, default_filter = "reject", "flagged"
        else:
            action, default_filter = "bonus", "completed_clean"
        try:
            people = review.review_selection(
                study=study, filter=options["filter"] or default_filter
            )
            result = review.crowd_review(
                study=study,
                user=None,
                action=action,
                participants=people,
                amount_cents=review.parse_money(options["bonus"] or "", field="bonus"),
                per_judgment_cents=review.parse_money(
                    options["bonus_per_judgment"] or "", field="bonus"
                ),
                reason=options["bonus_reason"],
                message=options["message"],
                category=options["category"],
                dry_run=options["dry_run"],
            )
        except (ServiceError, PlatformError) as exc:
            raise CommandError(str(exc)) from None
        for row in result["rows"]:
            entry = row.get("entry")
            state = entry.get_status_display() if entry else "would be sent"
            amount = f" {row['amount']}" if action == "bonus" else ""
            self.stdout.write(f"{row['participant'].pseudonym}: {action}{amount}: {state}")
        total = f", total {result['total']}" if action == "bonus" else ""
        prefix = "Dry run: " if options["dry_run"] else ""
        self.stdout.write(f"{prefix}{len(result['rows'])} worker(s){total}.")
