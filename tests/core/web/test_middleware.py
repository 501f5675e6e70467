"""apps.core.web.middleware, called as Django calls it. SecurityHeadersMiddleware: the Content-Security-Policy on every
answer (a view's own kept), and `private, no-store` on any answer to a request with credentials or a logged-in user,
never on an anonymous one. StyledErrorPagesMiddleware with DEBUG on: Django's technical pages (which list the URL
patterns and the settings) replaced by the site's own of the same status, what is not a technical page left alone,
an exception answered as DEBUG off would, and a 400 told why Django could not read the request. Through the test
client: tests/core/test_bad_requests_debug.py, test_error_pages_debug.py and test_headers_and_tokens.py."""

from __future__ import annotations

import json
import logging

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.test import RequestFactory

from apps.core.web.middleware import SecurityHeadersMiddleware, StyledErrorPagesMiddleware

TECHNICAL = b"<html>... You're seeing this error because you have DEBUG = True in your Django settings file ...</html>"


def _request(path: str = "/jobs/", **extra: str) -> HttpRequest:
    request = RequestFactory().get(path, **extra)
    request.user = AnonymousUser()
    return request


def _answering(response: HttpResponse):
    return lambda request: response


@pytest.fixture
def debug(settings) -> None:
    settings.DEBUG = True
    settings.FLEETWATT_DEBUG_TRACEBACK_PAGES = False


# security headers


def test_every_answer_carries_the_policy_and_a_views_own_is_kept(settings) -> None:
    settings.FLEETWATT_CONTENT_SECURITY_POLICY = "default-src 'self'"
    answer = SecurityHeadersMiddleware(_answering(HttpResponse("x")))(_request())
    assert answer["Content-Security-Policy"] == "default-src 'self'"
    own = HttpResponse("x")
    own["Content-Security-Policy"] = "sandbox"
    assert SecurityHeadersMiddleware(_answering(own))(_request())["Content-Security-Policy"] == "sandbox"
    settings.FLEETWATT_CONTENT_SECURITY_POLICY = ""
    assert "Content-Security-Policy" not in SecurityHeadersMiddleware(_answering(HttpResponse("x")))(_request())


def test_an_anonymous_answer_may_be_kept_and_one_with_credentials_or_a_user_may_not() -> None:
    middleware = SecurityHeadersMiddleware(lambda request: HttpResponse("figures"))
    assert "Cache-Control" not in middleware(_request())
    assert middleware(_request(HTTP_AUTHORIZATION="Bearer fw_x"))["Cache-Control"] == "private, no-store"
    logged_in = _request()
    logged_in.user = User(username="ada")  # (is_authenticated: a real user)
    assert middleware(logged_in)["Cache-Control"] == "private, no-store"
    no_user = RequestFactory().get("/healthz")  # before AuthenticationMiddleware ran
    assert "Cache-Control" not in middleware(no_user)


# styled error pages


@pytest.mark.parametrize(
    ("status", "title"),
    [(404, "<h1>Not found</h1>"), (403, "<h1>This page is not yours to see</h1>"), (500, "<h1>Server error</h1>")],
)
def test_a_technical_page_is_replaced_by_the_sites_own(debug, status: int, title: str) -> None:
    answer = StyledErrorPagesMiddleware(_answering(HttpResponse(TECHNICAL, status=status)))(_request())
    assert answer.status_code == status
    assert b"DEBUG = True" not in answer.content and title.encode() in answer.content


def test_under_the_api_the_replacement_is_json(debug) -> None:
    answer = StyledErrorPagesMiddleware(_answering(HttpResponse(TECHNICAL, status=404)))(_request("/api/jobs/9/"))
    assert answer.status_code == 404 and json.loads(answer.content) == {"detail": "Not found."}


def test_what_is_not_a_technical_page_is_left_alone(debug) -> None:
    for response in (
        HttpResponse(b"our own 404", status=404),
        HttpResponse(TECHNICAL, status=200),
        StreamingHttpResponse(iter([TECHNICAL]), status=500),
    ):
        assert StyledErrorPagesMiddleware(_answering(response))(_request()) is response


def test_with_debug_off_or_traceback_pages_asked_for_django_answers(settings) -> None:
    page = HttpResponse(TECHNICAL, status=500)
    settings.DEBUG = False
    assert StyledErrorPagesMiddleware(_answering(page))(_request()) is page
    settings.DEBUG, settings.FLEETWATT_DEBUG_TRACEBACK_PAGES = True, True
    assert StyledErrorPagesMiddleware(_answering(page))(_request()) is page
    # a technical 404 lists every URL pattern: replaced even then
    missing = StyledErrorPagesMiddleware(_answering(HttpResponse(TECHNICAL, status=404)))(_request())
    assert b"DEBUG = True" not in missing.content


def test_a_view_error_is_the_sites_500_and_its_traceback_goes_to_the_log(debug, caplog) -> None:
    middleware = StyledErrorPagesMiddleware(_answering(HttpResponse()))
    with caplog.at_level(logging.ERROR, logger="django.request"):
        answer = middleware.process_exception(_request("/api/x/"), ZeroDivisionError("oops"))
    assert answer is not None and answer.status_code == 500
    assert json.loads(answer.content) == {"detail": "Server error."}
    (record,) = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


def test_client_errors_raised_in_a_view_keep_their_status(debug) -> None:
    middleware = StyledErrorPagesMiddleware(_answering(HttpResponse()))
    for exc in (SuspiciousOperation("x"), BadRequest("y")):
        answer = middleware.process_exception(_request("/api/x/"), exc)
        assert answer is not None and answer.status_code == 400
    # Django's own 403 and 404 answer these (their technical 404 replaced on the way out)
    assert middleware.process_exception(_request(), Http404()) is None
    assert middleware.process_exception(_request(), PermissionDenied()) is None


def test_process_exception_does_nothing_with_debug_off(settings) -> None:
    settings.DEBUG = False
    assert StyledErrorPagesMiddleware(_answering(HttpResponse())).process_exception(_request(), ValueError()) is None


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"HTTP_HOST": "evil.example"}, "This site does not answer to that host name."),
        ({"CONTENT_LENGTH": "999999999"}, "The form sent is larger than this site takes."),
        ({}, "The request could not be read."),
    ],
)
def test_a_technical_400_says_why_the_request_could_not_be_read(debug, settings, extra, reason) -> None:
    settings.ALLOWED_HOSTS = ["testserver"]
    request = RequestFactory().post(
        "/api/login/", data=b"a=1", content_type="application/x-www-form-urlencoded", **extra
    )
    answer = StyledErrorPagesMiddleware(_answering(HttpResponse(TECHNICAL, status=400)))(request)
    assert answer.status_code == 400 and json.loads(answer.content) == {"detail": reason}


def test_a_form_with_more_fields_than_allowed_is_told_so(debug, settings) -> None:
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 3
    body = b"&".join(b"f%d=1" % i for i in range(4))
    request = RequestFactory().post("/api/x/", data=body, content_type="application/x-www-form-urlencoded")
    answer = StyledErrorPagesMiddleware(_answering(HttpResponse(TECHNICAL, status=400)))(request)
    assert json.loads(answer.content) == {"detail": "The form sent has more fields than this site takes."}
