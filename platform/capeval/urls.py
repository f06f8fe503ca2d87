"""URL configuration: pages, participant flow, API and admin."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.static import serve
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView


def serve_media(request, path):
    """Serve uploaded images, reading MEDIA_ROOT per request (tests point it elsewhere)."""
    return serve(request, path, document_root=settings.MEDIA_ROOT)


urlpatterns = [
    path("", include("annotation.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", include("annotation.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api_docs"),
    # Images are served by Django in the embedded default; a deployment may put them behind
    # the web server instead. Names are content hashes, so they never collide or leak names.
    path(f"{settings.MEDIA_URL.strip('/')}/<path:path>", serve_media),
]
