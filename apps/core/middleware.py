"""Error pages a person can use with DEBUG on too (the demo, a developer's machine)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from .views import page_not_found

# What Django's technical 404 page says of itself; with DEBUG off, handler404 answers instead.
_TECHNICAL_404 = b"DEBUG = True"


class StyledNotFoundMiddleware:
    """With DEBUG on, Django answers a 404 with its technical page, which lists every URL pattern: the site's
    own 404 page (JSON under /api/) answers instead. A 500 keeps its traceback page: that one is for the
    developer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and not response.streaming
            and _TECHNICAL_404 in response.content
        ):
            return page_not_found(request, Exception())
        return response
