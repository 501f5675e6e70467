"""The dashboard's pages kept rendered: each viewer's page made once per data generation and kept in the cache, as
the API's pages are (apps.core.page_cache), and made again after an ingest for those who asked for it lately.

A page reads many sums (a team's month is thousands of jobs split by user and by group; the audit queue's money at
stake is every open finding's worth in the period), and people come back to the same pages: a team lead's home, an
admin's queue between two decisions. A page answered 200 to a GET is kept, as the HTML sent, under:
- the viewer (the page's menu names them and shows what they may open) and what they may see (apps.core.access.policy's
  scope: a member who leaves a team no longer reads its pages);
- the whole URL (host, path, query);
- the UTC hour it was made in: a page saying how far the ingest is behind, or made for "this month", is made
  again each hour, whatever the data;
and stamped with the data's generation read before it was made (apps.core.kept): a page of another
generation is made again (every change of what a page shows moves the generation on: an ingest's write, an admin's
edit or decision). While an ingest is in progress, the page kept before it is answered, as the rollups' documents
are (apps.rollups.documents), and one made meanwhile is kept under the generation the ingest started at, so it is
made again once the ingest is done. After an ingest, the pages asked for within FLEETWATT_ROLLUPS_ASKED_WITHIN_S
(the FLEETWATT_ROLLUPS_ASKED_KEEP most recent) are made again by the ingest's task, once the rollups' documents are,
before the documents kept before it stop being served: the first ask after an ingest reads the cache.

What differs between two answers of one page is put back in each: the forms' CSRF token (kept as a placeholder). A
request with messages to show (a decision's outcome, shown once) is answered by the view, and its page not kept.
FLEETWATT_PAGE_CACHE_S bounds an entry's life (0: no page is kept). Redis unreachable: every page is made on each
request (apps.core.fail_open_cache)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeGuard, TypeVar, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.middleware.csrf import get_token
from django.test import RequestFactory
from django.urls import Resolver404, resolve

from apps.core.access.policy import viewer_scope
from apps.core.kept import (
    PAGES_ASKED_KEY,
    current_reads,
    html_page_key,
    keep_generation,
    kept_read_or_previous,
    kept_write,
    making_key,
)
from apps.core.metrics import PAGE_CACHE
from apps.core.services import metric_count

log = logging.getLogger(__name__)

View = TypeVar("View", bound=Callable[..., HttpResponseBase])

# `{% csrf_token %}`'s field: its value differs per answer (a masked token of the viewer's secret).
CSRF_FIELD = re.compile(rb'(name="csrfmiddlewaretoken" value=")[^"]*(")')
CSRF_PLACEHOLDER = b"fleetwatt-csrf-token"
_PREPARING = "_fleetwatt_page_preparing"  # set on the request a page is prepared with after an ingest


def page_key(request: HttpRequest) -> str | None:
    """The cache key of the page this request asks for, or None where it is not kept."""
    if settings.FLEETWATT_PAGE_CACHE_S <= 0 or request.method != "GET":
        return None
    user = request.user
    if not user.is_authenticated or len(messages.get_messages(request)):
        return None
    what = "\n".join([str(user.pk), viewer_scope(user), _hour(), request.build_absolute_uri()])
    return html_page_key(hashlib.sha256(what.encode()).hexdigest())


def _hour() -> str:
    """The UTC hour a page is made in: a page is kept within it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H")


def kept_page(view: View) -> View:
    """For a page's view (GET, the viewer checked before it): its 200 HTML answers kept as this module says."""

    @functools.wraps(view)
    def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        key = page_key(request)
        if key is None:
            return view(request, *args, **kwargs)
        if getattr(request, _PREPARING, False):
            return _made(view, request, args, kwargs, key=key, generation=kept_read_or_previous(key)[0])
        generation, kept, kept_at = kept_read_or_previous(key)
        if kept is None:
            kept = _made_by_another(key, generation)
        if kept is not None:
            metric_count(metric=PAGE_CACHE, labels=["hit" if kept_at in (generation, None) else "previous"])
            _asked(request)
            return _answered(request, kept)
        metric_count(metric=PAGE_CACHE, labels=["miss"])
        making = making_key(key, generation)
        try:
            response = _made(view, request, args, kwargs, key=key, generation=generation)
        finally:
            cache.delete(making)
        _asked(request)
        return response

    return cast(View, answer)


def _made(
    view: Callable[..., HttpResponseBase], request: HttpRequest, args: Any, kwargs: Any, *, key: str, generation: int
) -> HttpResponseBase:
    """The view's answer, kept where it is a page to keep (under keep_generation: the generation it is of)."""
    response = view(request, *args, **kwargs)
    if _keepable(response):
        page = (CSRF_FIELD.sub(rb"\1" + CSRF_PLACEHOLDER + rb"\2", response.content), response["Content-Type"])
        kept_write(key, keep_generation(generation), page, settings.FLEETWATT_PAGE_CACHE_S)
    return response


# A page asked for by many at once (a team's page reloaded by its members after an admin's edit) is made once: the
# first to miss it marks that it is making it, for MAKING_S at most; the others wait for it, asking the cache every
# MAKING_POLL_S, and make it themselves only if the mark goes without a page (an error, another generation).
MAKING_S = 10.0  # (within GUNICORN_TIMEOUT: a waiting worker is not taken for a hung one)
MAKING_POLL_S = 0.02


def _made_by_another(key: str, generation: int) -> tuple[bytes, str] | None:
    """None where this request is to make the page (it holds the mark now); else the page another request made."""
    making = making_key(key, generation)
    if cache.add(making, 1, timeout=MAKING_S):
        return None
    until = time.monotonic() + MAKING_S
    while time.monotonic() < until:
        time.sleep(MAKING_POLL_S)
        _, kept, _ = kept_read_or_previous(key)
        if kept is not None:
            return cast(tuple[bytes, str], kept)
        if cache.add(making, 1, timeout=MAKING_S):  # the maker is gone without a page: this request makes it
            return None
    return None


def _keepable(response: HttpResponseBase) -> TypeGuard[HttpResponse]:
    return (
        isinstance(response, HttpResponse)
        and response.status_code == 200
        and not response.cookies
        and response.get("Content-Type", "").startswith("text/html")
    )


def _answered(request: HttpRequest, kept: tuple[bytes, str]) -> HttpResponse:
    body, content_type = kept
    if CSRF_PLACEHOLDER in body:
        body = body.replace(CSRF_PLACEHOLDER, get_token(request).encode())
    return HttpResponse(body, content_type=content_type)


# When this process last recorded each page asked for (time.monotonic()): a page asked again within
# ASKED_RECORD_S is not recorded again (a round trip to Redis less on most answers; an ask's time is what orders the
# pages to prepare, to the minute).
ASKED_RECORD_S = 60.0
_recorded: dict[str, float] = {}


def _asked(request: HttpRequest) -> None:
    record = getattr(cache, "sorted_add", None)  # (a cache other than Redis records nothing)
    if record is None:
        return
    member = json.dumps([request.user.pk, request.scheme, request.get_host(), request.get_full_path()])
    now = time.monotonic()
    if now - _recorded.get(member, -ASKED_RECORD_S) < ASKED_RECORD_S:
        return
    if len(_recorded) > 10 * settings.FLEETWATT_ROLLUPS_ASKED_KEEP:
        _recorded.clear()
    _recorded[member] = now
    record(PAGES_ASKED_KEY, member, time.time(), keep=settings.FLEETWATT_ROLLUPS_ASKED_KEEP)


def asked_pages_prepare(until: float) -> None:
    """After an ingest (apps.rollups.documents.asked_prepare, once the documents are prepared): the pages asked for
    lately made again for those who asked, most recently asked first, until `until` (time.perf_counter()), each
    kept at the current generation and made of current documents only. A page whose viewer is gone, or that no
    longer answers 200, is forgotten."""
    top = getattr(cache, "sorted_top", None)
    if top is None or settings.FLEETWATT_PAGE_CACHE_S <= 0:
        return
    members = top(PAGES_ASKED_KEY, min_score=time.time() - settings.FLEETWATT_ROLLUPS_ASKED_WITHIN_S,
                  count=settings.FLEETWATT_ROLLUPS_ASKED_KEEP)  # fmt: skip
    prepared = failed = 0
    began = time.perf_counter()
    for member in members:
        if time.perf_counter() > until:
            break
        try:
            kept = _prepare_one(member)
        except Exception:
            log.exception("page %s not prepared", member)
            failed += 1
            continue
        if kept:
            prepared += 1
        else:
            cache.sorted_remove(PAGES_ASKED_KEY, member)  # type: ignore[attr-defined]
    if members:
        log.info("pages after the ingest: %d of %d prepared, %d failed, in %.1fs", prepared, len(members), failed,
                 time.perf_counter() - began)  # fmt: skip


def _prepare_one(member: str) -> bool:
    """The page `member` names made again for its viewer, as their GET would make it; False where it is no page
    to keep (its viewer gone or inactive, its URL no page's, an answer other than 200)."""
    try:  # (a member recorded without its scheme, by an older release, is forgotten)
        user_pk, scheme, host, path = json.loads(member)
    except (TypeError, ValueError):
        return False
    user = get_user_model().objects.filter(pk=user_pk, is_active=True).first()
    try:
        match = resolve(str(path).split("?", 1)[0])
    except Resolver404:
        return False
    if user is None:
        return False
    # The scheme it was asked with (behind a TLS proxy, https): the page's key holds the whole URL, scheme included.
    request = RequestFactory().get(str(path), HTTP_HOST=str(host), secure=scheme == "https")
    request.user = user
    setattr(request, _PREPARING, True)
    try:
        with current_reads():
            response = match.func(request, *match.args, **match.kwargs)
    except (SuspiciousOperation, Http404, PermissionDenied):  # (a host no longer allowed; a page no longer theirs)
        return False
    return _keepable(response)
