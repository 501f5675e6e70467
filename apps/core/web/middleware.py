"""Error pages a person can use with DEBUG on too (the demo, a developer's machine)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    DisallowedHost,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
)
from django.http import Http404, HttpRequest, HttpResponse

from .views import bad_request, page_not_found, permission_denied, server_error

# What Django's technical pages (its 404 page listing every URL pattern, its traceback page, which it also sends
# for a 400 with DEBUG on) say of themselves; with DEBUG off, the handlers answer instead.
_TECHNICAL = b"DEBUG = True"
# Exceptions of a view that Django answers with its 403 and 404 rather than a 500.
_NOT_ALLOWED_OR_FOUND = (Http404, PermissionDenied)

logger = logging.getLogger("django.request")


class StyledErrorPagesMiddleware:
    """With DEBUG on, Django answers a 404 with its technical page, which lists every URL pattern, and an error,
    a bad Host header or a form too large with its traceback page (the settings, the database's and Redis's
    addresses), to anyone: the site's own 400, 403, 404 and 500 pages (JSON under /api/) answer instead, and the
    traceback goes to the log. FLEETWATT_DEBUG_TRACEBACK_PAGES=1 keeps Django's traceback page for a developer
    who wants it in the browser."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code >= 400
            and not response.streaming
            and _TECHNICAL in response.content
            and (response.status_code == 404 or not settings.FLEETWATT_DEBUG_TRACEBACK_PAGES)
        ):
            return _site_page(request, response.status_code)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not settings.DEBUG or settings.FLEETWATT_DEBUG_TRACEBACK_PAGES:
            return None  # DEBUG off: the handlers answer, and Django logs the error itself
        if isinstance(exception, SuspiciousOperation | BadRequest):
            return bad_request(request, exception)  # (RequestDataTooBig in a view: a 400, as with DEBUG off)
        if isinstance(exception, _NOT_ALLOWED_OR_FOUND):
            return None  # Django's 403 and 404 (the technical 404 replaced above)
        logger.error("Internal Server Error: %s", request.path, exc_info=exception, extra={"request": request})
        return server_error(request)


def _site_page(request: HttpRequest, status: int) -> HttpResponse:
    """The site's page for a technical page of this status: the request's fault told as the handlers tell it."""
    if status == 404:
        return page_not_found(request, Exception())
    if status == 403:
        return permission_denied(request, Exception())
    if status == 400:
        return bad_request(request, _unreadable(request))
    return server_error(request)


def _unreadable(request: HttpRequest) -> Exception | None:
    """Why Django could not read the request (raised by a middleware, the exception is gone): its host, a body
    larger than it takes, or a form with more fields; None where none of them (a malformed form)."""
    try:
        request.get_host()
    except DisallowedHost as exc:
        return exc
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    length = request.META.get("CONTENT_LENGTH") or "0"
    if limit is not None and length.isascii() and length.isdigit() and int(length) > limit:
        return RequestDataTooBig()
    try:
        body = request.body  # (read and kept by Django before it counted the fields)
    except Exception:  # the stream was read otherwise (a multipart form): no count to make
        return None
    fields = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    if fields is not None and body.count(b"&") + 1 > fields:
        return TooManyFieldsSent()
    return None


class SecurityHeadersMiddleware:
    """Every answer carries the Content-Security-Policy (FLEETWATT_CONTENT_SECURITY_POLICY); an answer to a user who
    is logged in, or to a request with credentials (an API token), `Cache-Control: private, no-store`: no proxy
    or browser keeps a copy of a team's figures or a token's page (docs/operations.md, "Headers and tokens")."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.FLEETWATT_CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        user = getattr(request, "user", None)  # (set by AuthenticationMiddleware, and by DRF for a token)
        if request.META.get("HTTP_AUTHORIZATION") or (user is not None and user.is_authenticated):
            response["Cache-Control"] = "private, no-store"
        return response
