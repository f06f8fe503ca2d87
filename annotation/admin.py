from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.db.models import Q

from annotation.models import (
    Assignment,
    Caption,
    CrowdRefusal,
    Image,
    Item,
    Job,
    Judgment,
    PairJudgment,
    Participant,
    Reference,
    Study,
    User,
)


class KeepsJudgmentsAdmin(admin.ModelAdmin):
    """Refuse to delete objects whose deletion would take judgments with it, or orphan them.

    Judgments are never deleted (exclusions are flags). A study's judgments would go with
    it (CASCADE); other holders are PROTECTed by the database but the admin only said so
    in general terms. The refusal names how many judgments each object holds, on the
    delete page and in the "delete selected" action alike (both ask this method).
    """

    #: Lookups from Judgment to what identifies this admin's objects, e.g. "participant".
    judgment_paths: tuple[str, ...]
    #: The attribute of an object that the paths reach (a caption: its image).
    holder_key = "pk"

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        refusals = []
        for obj in objs:  # a page or a selection: a query each is fine in the admin
            key = getattr(obj, self.holder_key)
            reaches = Q()
            for path in self.judgment_paths:
                reaches |= Q(**{path: key})
            n = Judgment.objects.filter(reaches).distinct().count()
            if n:
                refusals.append(
                    f"{self.opts.verbose_name} “{obj}”: {n} judgment{'s' if n != 1 else ''} "
                    f"depend{'' if n != 1 else 's'} on it, and judgments are never deleted "
                    "(exclusions are flags)."
                )
        if not refusals:
            return deleted, counts, perms_needed, protected
        # The page shows missing permissions (here: judgment deletion, never granted)
        # instead of protected objects; show the reason that matters. A non-empty
        # ``protected`` alone refuses the deletion.
        return deleted, counts, set(), [*refusals, *protected]


@admin.register(User)
class CapEvalUserAdmin(KeepsJudgmentsAdmin, UserAdmin):
    judgment_paths = ("participant__user",)

    fieldsets = (*UserAdmin.fieldsets, ("CapEval", {"fields": ("is_researcher",)}))
    list_display = ("username", "email", "is_staff", "is_researcher")


@admin.register(Study)
class StudyAdmin(KeepsJudgmentsAdmin):
    judgment_paths = ("study",)
    list_display = ("name", "mode", "status", "owner", "created_at")
    list_filter = ("mode", "status")
    filter_horizontal = ("members", "annotators")


@admin.register(Image)
class ImageAdmin(KeepsJudgmentsAdmin):
    # The image of an item, or one of the several a HUMANr group shows.
    judgment_paths = ("item__image", "item__item_images__image")
    list_display = ("name", "study", "width", "height", "format")
    list_filter = ("study",)


@admin.register(Caption)
class CaptionAdmin(KeepsJudgmentsAdmin):
    # A caption is judged through the items that show its image.
    judgment_paths = ("item__image", "item__item_images__image")
    holder_key = "image_id"
    list_display = ("text", "system", "image", "purpose")
    list_filter = ("study", "system", "purpose")


@admin.register(Item)
class ItemAdmin(KeepsJudgmentsAdmin):
    judgment_paths = ("item",)
    list_display = ("id", "study", "kind", "position", "target", "judgment_count")
    list_filter = ("study", "kind")


@admin.register(Participant)
class ParticipantAdmin(KeepsJudgmentsAdmin):
    judgment_paths = ("participant",)
    list_display = ("pseudonym", "study", "source", "status", "completed_at", "created_at")
    list_filter = ("study", "source", "status")
    # Integrity records: kept as they were written.
    readonly_fields = ("browser_id", "address", "flags", "completed_at")
    # Self-reported vision is written once by its service and never shown beside a worker
    # id (docs/crowd.md, "Who rates"), nor the link group that all but says it.
    exclude = ("vision", "screen_reader", "link_group")


@admin.register(CrowdRefusal)
class CrowdRefusalAdmin(admin.ModelAdmin):
    """Refused crowd arrivals: a record, never edited or deleted here."""

    list_display = ("created_at", "study", "reason", "source", "external_id", "address")
    list_filter = ("study", "reason")

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("id", "participant", "item", "status", "served_at", "expires_at")
    list_filter = ("status",)


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    """Judgments as stored, to read: their payload, dwell time and timestamps are evidence,
    written once by the submission service. No add, no change, no delete here."""

    list_display = ("id", "study", "participant", "phase", "excluded", "created_at")
    list_filter = ("study", "item__kind", "excluded")
    list_select_related = ("study", "participant", "item")

    @admin.display(description="phase", ordering="item__kind")
    def phase(self, judgment: Judgment) -> str:
        """A judgment's phase is its item's kind (stored once, on the item)."""
        return judgment.item.kind

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # Without change permission the admin shows every field read-only and refuses a POST.
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        # Raw judgments are never deleted; exclusions are flags.
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "study", "status", "progress", "created_at")
    list_filter = ("kind", "status")


@admin.register(PairJudgment)
class PairJudgmentAdmin(admin.ModelAdmin):
    """Imported pairwise judgments (Pascal-50S), to read: evidence like judgments."""

    list_display = ("id", "study", "category", "choice", "source", "line")
    list_filter = ("study", "category")
    raw_id_fields = ("image", "caption_a", "caption_b")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Reference)
class ReferenceAdmin(admin.ModelAdmin):
    """Reference captions of the metric lab; imported with ``import_references``."""

    list_display = ("id", "study", "image", "text", "source", "line")
    list_filter = ("study",)
    raw_id_fields = ("image", "pair")
    search_fields = ("text",)
