"""URL configuration: pages, participant flow, API and admin."""

from csp.decorators import csp_update
from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation.views import media

urlpatterns = [
    path("", include("annotation.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", include("annotation.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI from local files (drf-spectacular-sidecar); the split view serves its start-up
    # script as a file (?script), and our template drops the inline <style>: the CSP allows
    # neither inline script nor inline style. Swagger UI draws its icons as data: SVG images,
    # so this page alone may show data: images.
    path(
        "api/docs/",
        csp_update({"img-src": ["data:"]})(
            SpectacularSwaggerSplitView.as_view(
                url_name="schema", template_name="api/swagger_ui.html"
            )
        ),
        name="api_docs",
    ),
    # Images are served by Django: display renditions to anyone, originals (with their EXIF)
    # only to the study's researchers, nothing else under MEDIA_ROOT (annotation/views/media.py).
    path(f"{settings.MEDIA_URL.strip('/')}/<path:path>", media.media_file, name="media_file"),
]

# A database outage raised outside a view (a middleware saving the session, say) reaches
# only the 500 handler: it answers 503 with Retry-After for those, a plain 500 otherwise.
handler500 = "annotation.views.health.server_error"
# What Django refuses before any view (too many form fields...) is JSON under /api/.
handler400 = "annotation.views.api_errors.bad_request"
