"""THumB's page in the admin: which registered annotators are native English speakers.

Its own model admin rather than a part of the User page: the User admin belongs to the
shared app, and a mode reaches no higher than the models (docs/architecture.md).
"""

from django.contrib import admin

from annotation.modes.thumb.models import Rater


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ("user", "native_english")
    list_filter = ("native_english",)
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    autocomplete_fields = ("user",)
