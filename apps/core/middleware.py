"""Error pages a person can use with DEBUG on too (the demo, a developer's machine)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from .views import page_not_found, server_error

# What Django's technical 404 page says of itself; with DEBUG off, handler404 answers instead.
_TECHNICAL_404 = b"DEBUG = True"

logger = logging.getLogger("django.request")


class StyledErrorPagesMiddleware:
    """With DEBUG on, Django answers a 404 with its technical page, which lists every URL pattern, and an
    error with its traceback page: the site's own 404 and 500 pages (JSON under /api/) answer instead, and the
    traceback goes to the log. FLEETWATT_DEBUG_TRACEBACK_PAGES=1 keeps Django's traceback page for a
    developer who wants it in the browser."""

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

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not settings.DEBUG or settings.FLEETWATT_DEBUG_TRACEBACK_PAGES:
            return None  # DEBUG off: handler500 answers, and Django logs the error itself
        if isinstance(exception, Http404 | PermissionDenied):
            return None  # not errors: Django answers them (handler403; its 404 page, which __call__ replaces)
        logger.error("Internal Server Error: %s", request.path, exc_info=exception, extra={"request": request})
        return server_error(request)
