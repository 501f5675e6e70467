"""Pages of the API's lists and sums, rendered once per data generation and kept in the cache.

Dashboards and finance tools ask for the same pages again and again between two ingests; each costs a
filter form, a query over a million jobs and a page of rows rendered. A page is kept, as the JSON sent, under:
- what the caller may see: an admin's view, finance's, or the ids of a member's teams (the rows are the same
  for all who see the same; nothing in a row depends on who asks);
- the view, the renderer and the whole URL (host, path, query: the cursor links in the page are absolute);
and stamped with the data's generation (apps.core.kept) read before it was computed: a page of another
generation is computed again and replaces it (any change of what a page shows moves the generation on). The
generation and the page are read in one round trip to Redis; a page of an old generation is overwritten, not
left behind until it expires.
Only a JSON page that answered 200 is kept; authentication, permissions, throttles and the check of the query's
parameters run on every request before the cache is read. `FLEETWATT_API_PAGE_CACHE_S` bounds an entry's life
(0: no page is cached). Redis unreachable: every request computes its page (apps.core.fail_open_cache).
The rollups' pages (`cached_page_or_previous`) are read as their documents are (apps.rollups.documents): while an
ingest is in progress, a page kept before it is answered until the new documents are prepared."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.conf import settings
from django.db.models.signals import post_delete, post_save
from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from .access.policy import viewer_scope
from .kept import api_page_key, data_changed, kept_read, kept_read_or_previous, kept_write
from .metrics import API_PAGE_CACHE
from .services import metric_count

Handler = TypeVar("Handler", bound=Callable[..., Any])

# Models the cached pages show that are saved one row at a time (the admin's edits, a report's row made): a save
# or delete moves the generation on. Jobs, findings, hours and the GPUs an ingest finds are written by the
# pipeline, whose writes call data_changed() once for many rows (and the few one-row writes, a decision and a
# job's work, call it too): a listener on their saves and deletes would be called per row, and makes Django
# fetch every row a bulk delete removes, to signal it. A report's sends update its row: its queryset's update()
# moves the generation on (apps.reports.models).
SHOWN_MODELS = (
    "fleet.Team", "fleet.Cluster", "fleet.Node", "fleet.Gpu", "carbon.Site", "carbon.JobGroup", "reports.WeeklyReport",
)  # fmt: skip


def page_cache_key(request: Request, view: Any) -> str | None:
    """The cache key of the page this request asks for, or None where it is not cached."""
    if settings.FLEETWATT_API_PAGE_CACHE_S <= 0 or request.method != "GET":
        return None
    renderer = getattr(request, "accepted_renderer", None)
    if renderer is None or renderer.format != "json":
        return None
    user = request.user
    if not user.is_authenticated:
        return None
    what = "\n".join([type(view).__qualname__, request.accepted_media_type, request.build_absolute_uri()])
    digest = hashlib.sha256(what.encode()).hexdigest()
    return api_page_key(viewer_scope(user), digest)


def cached_page(handler: Handler) -> Handler:
    """For a handler of a view with CachedPagesMixin: its JSON answer kept as this module says."""
    return _cached(handler, kept_read)


def cached_page_or_previous(handler: Handler) -> Handler:
    """cached_page, for a handler answering the rollups' kept documents (apps.rollups.documents): while an ingest
    is in progress, a page kept before it is answered, as the documents themselves are."""

    def read(key: str) -> tuple[int, Any]:
        generation, kept, _ = kept_read_or_previous(key)
        return generation, kept

    return _cached(handler, read)


def _cached(handler: Handler, read: Callable[[str], tuple[int, Any]]) -> Handler:
    @functools.wraps(handler)
    def answer(self: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
        key = page_cache_key(request, self)
        if key is not None:
            generation, kept = read(key)
            metric_count(metric=API_PAGE_CACHE, labels=["miss" if kept is None else "hit"])
            if kept is not None:
                body, content_type = kept
                return HttpResponse(body, content_type=content_type)
            self._page_key, self._page_generation = key, generation
        return handler(self, request, *args, **kwargs)

    return cast(Handler, answer)


class CachedPagesMixin:
    """For a view whose handlers are decorated with @cached_page: keeps their 200 JSON answers."""

    _page_key: str | None = None
    _page_generation = 0

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if self._page_key is not None and response.status_code == 200 and not response.streaming:
            if isinstance(response, Response):
                response.render()
            # (A rollup may answer with its own kept document, already rendered: an HttpResponse.)
            page = (response.content, response["Content-Type"])
            kept_write(self._page_key, self._page_generation, page, settings.FLEETWATT_API_PAGE_CACHE_S)
        return response


class CachedListMixin(CachedPagesMixin):
    """For a viewset: its list's JSON pages kept as this module says."""

    @cached_page
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return super().list(request, *args, **kwargs)  # type: ignore[misc]


def _shown_row_changed(**kwargs: Any) -> None:
    data_changed()


def page_cache_signals_connect() -> None:
    for model in SHOWN_MODELS:
        post_save.connect(_shown_row_changed, sender=model, dispatch_uid=f"fleetwatt-shown-save-{model}")
        post_delete.connect(_shown_row_changed, sender=model, dispatch_uid=f"fleetwatt-shown-delete-{model}")
