"""The CapEval Django project: settings, URLs, the Celery app and the WSGI/ASGI entry points."""

from capeval.celery_app import app as celery_app

__all__ = ["celery_app"]
__version__ = "0.1.0"
