"""HTML views, thin: they parse the request, call selectors and services, and render.
Fragments are rendered when ``request.htmx`` is set."""
