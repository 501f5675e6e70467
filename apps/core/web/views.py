"""The error pages a client gets: a request that cannot be read (400), not allowed (403), not found (404), the app
cannot answer (500)."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import DisallowedHost, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated

_UNAVAILABLE_HTML = (
    "<!doctype html><title>fleetwatt: unavailable</title><h1>Service unavailable</h1>"
    "<p>fleetwatt cannot reach its database just now. Try again in a minute.</p>"
)
_ERROR_HTML = "<!doctype html><title>fleetwatt: server error</title><h1>Server error</h1>"


_BAD_REQUEST_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (DisallowedHost, "This site does not answer to that host name."),
    (RequestDataTooBig, "The form sent is larger than this site takes."),
    (TooManyFieldsSent, "The form sent has more fields than this site takes."),
    (TooManyFilesSent, "The form sent has more files than this site takes."),
)


def bad_request_reason(exception: BaseException | None) -> str:
    """What a client is told of a request Django could not read: the kind of fault, never its detail (the host
    it was sent to, a setting's name)."""
    for kind, reason in _BAD_REQUEST_REASONS:
        if isinstance(exception, kind):
            return reason
    return "The request could not be read."


def bad_request(request: HttpRequest, exception: BaseException | None) -> HttpResponse:
    """handler400 (a bad Host header, a form too large or with too many fields, and the like): the site's page, or
    JSON under /api/. Rendered without the request, which could not be read (its host, its body)."""
    reason = bad_request_reason(exception)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason}, status=400)
    return HttpResponse(loader.get_template("400.html").render({"reason": reason}), status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler403: the site's page that says why (the PermissionDenied's message), JSON under /api/."""
    reason = str(exception) if exception and str(exception) else ""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason or "You do not have permission to do this."}, status=403)
    return render(request, "403.html", {"reason": reason}, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404 (when DEBUG is off): the site's page, JSON under /api/."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return render(request, "404.html", status=404)


def _error_page(*, unavailable: bool) -> str:
    """500.html in the site's layout, rendered without the request (no user, no session, no database);
    the plain page should even that fail."""
    try:
        return loader.get_template("500.html").render({"unavailable": unavailable})
    except Exception:  # the error page of last resort must not fail in turn
        return _UNAVAILABLE_HTML if unavailable else _ERROR_HTML


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500. A database that cannot be reached is a 503 with Retry-After (a client may try again);
    the API answers JSON, as it does for every other error. The page is rendered without the request: a
    template's context (the user, the session) may need the database that just failed."""
    unavailable = isinstance(sys.exc_info()[1], OperationalError | InterfaceError)
    status = 503 if unavailable else 500
    response: HttpResponse
    if request.path.startswith("/api/"):
        detail = "The database is unavailable; try again shortly." if unavailable else "Server error."
        response = JsonResponse({"detail": detail}, status=status)
    else:
        response = HttpResponse(_error_page(unavailable=unavailable), status=status)
    if unavailable:
        response["Retry-After"] = "30"
    return response


class _DocsAccess:
    """The schema and its docs: for logged-in users and API tokens while FLEETWATT_API_DOCS_LOGIN is on (read per
    request), for anyone otherwise. A person sent to the docs without a session is sent to the login page."""

    redirect_to_login = False

    def get_permissions(self) -> list[BasePermission]:
        return [IsAuthenticated()] if settings.FLEETWATT_API_DOCS_LOGIN else [AllowAny()]

    def handle_exception(self, exc: Exception) -> Any:  # (a Response, or the login page's redirect)
        request = self.request  # type: ignore[attr-defined]
        if self.redirect_to_login and isinstance(exc, NotAuthenticated):
            return redirect_to_login(request.get_full_path())
        return super().handle_exception(exc)  # type: ignore[misc]


class ApiSchemaView(_DocsAccess, SpectacularAPIView):
    pass


class ApiDocsView(_DocsAccess, SpectacularSwaggerSplitView):
    redirect_to_login = True
