from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Every installed mode app's ``mode.py`` registers its mode (as the admin finds each
        # app's admin.py). Here, once the models are ready, so the registry, and with it
        # Study.mode's choices, is complete in every process: web, worker, command, shell.
        autodiscover_modules("mode")
