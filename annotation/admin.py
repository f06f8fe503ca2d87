from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from annotation.models import (
    Assignment,
    Caption,
    Image,
    Item,
    Job,
    Judgment,
    Participant,
    Study,
    User,
)


@admin.register(User)
class CapEvalUserAdmin(UserAdmin):
    fieldsets = (*UserAdmin.fieldsets, ("CapEval", {"fields": ("is_researcher", "native_english")}))
    list_display = ("username", "email", "is_staff", "is_researcher", "native_english")


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("name", "mode", "status", "owner", "created_at")
    list_filter = ("mode", "status")
    filter_horizontal = ("members", "annotators")


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ("name", "study", "width", "height", "format")
    list_filter = ("study",)


@admin.register(Caption)
class CaptionAdmin(admin.ModelAdmin):
    list_display = ("text", "system", "image", "purpose")
    list_filter = ("study", "system", "purpose")


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "kind", "position", "target", "judgment_count")
    list_filter = ("study", "kind")


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("pseudonym", "study", "source", "status", "created_at")
    list_filter = ("study", "source", "status")


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("id", "participant", "item", "status", "served_at", "expires_at")
    list_filter = ("status",)


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "participant", "phase", "excluded", "created_at")
    list_filter = ("study", "phase", "excluded")

    def has_delete_permission(self, request, obj=None) -> bool:
        # Raw judgments are never deleted; exclusions are flags.
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "study", "status", "progress", "created_at")
    list_filter = ("kind", "status")
