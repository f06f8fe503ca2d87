"""Access decorators shared by the view modules."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest


def researcher_required(view):
    """Only researchers and staff; anyone else gets a 404 like a missing page."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        if not (request.user.is_researcher or request.user.is_staff):
            raise Http404("No such page.")
        return view(request, *args, **kwargs)

    return wrapped
