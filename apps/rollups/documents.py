"""The rollups' documents as the API answers them, kept ready: a team's, a cluster's and a job group's rollup as
finance tools read it (JSON, costs in minor units) and the teams side by side. Each reads daily sums (a few ms),
or a range's hour rows where it is not whole UTC days (tenths of a second), so each is kept, stamped with the
data's generation (apps.core.kept), and the ones people asked for lately are prepared again after every
ingest, by the ingest's own task once its hours are committed: the first ask after an ingest reads the cache.

Every ask answered is recorded (what, and when: a sorted set in Redis, FLEETWATT_ROLLUPS_ASKED_KEEP at most); one
that failed is not. After an
ingest, `asked_prepare` computes again those asked within FLEETWATT_ROLLUPS_ASKED_WITHIN_S, most recent first,
for FLEETWATT_ROLLUPS_PREPARE_BUDGET_S at most. Until then a document kept before the ingest is served in its
stead (`kept_read_or_previous`: figures as of the hour before, for FLEETWATT_ROLLUPS_STALE_S at most; an
admin's edit is seen at once), and the page cache does not keep a page made of it. What reads the documents and is
prepared with them registers in PREPARED_AFTER (the dashboard's pages, apps.dashboard.page_cache): it runs once the
documents are prepared, before the ingest's mark is lifted."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model
from rest_framework.renderers import JSONRenderer

from apps.carbon.models import JobGroup
from apps.core.access.policy import viewer_scope
from apps.core.kept import (
    ROLLUPS_ASKED_KEY,
    finance_document_key,
    ingest_prepared,
    ingest_started_at,
    kept_or_computed,
    teams_compared_key,
)
from apps.core.metrics import ROLLUP_CACHE
from apps.core.services import metric_count
from apps.fleet.models import Cluster, Team

from . import compare_selectors, cost_selectors, selectors
from .finance import for_finance, money_as_text

log = logging.getLogger(__name__)

KEPT_S = selectors.ROLLUP_CACHE_SECONDS
# What else is prepared after an ingest, once the documents are (it reads them) and before the ingest's mark is
# lifted, in what is left of the budget: each is called with the time (time.perf_counter()) to stop at. The
# dashboard's pages register theirs when the app starts (apps.dashboard.page_cache).
PREPARED_AFTER: list[Callable[[float], None]] = []


@dataclass(frozen=True)
class Ask:
    """One document asked for: its kind, what it sums (a team, a cluster or a job group; for the teams side by
    side, the user asking, whose view decides the teams), the period and its granularity ("" where none)."""

    kind: str
    subject_id: int
    start: datetime
    end: datetime
    granularity: str = ""

    def as_member(self) -> str:
        return json.dumps([self.kind, self.subject_id, self.start.isoformat(), self.end.isoformat(), self.granularity])

    @classmethod
    def from_member(cls, text: str) -> Ask:
        """The ask recorded as `text` (ValueError for anything else)."""
        try:
            kind, subject_id, start, end, granularity = json.loads(text)
            ask = cls(str(kind), int(subject_id), datetime.fromisoformat(start), datetime.fromisoformat(end),
                      str(granularity))  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a recorded ask: {text!r}") from exc
        if ask.kind not in KINDS:
            raise ValueError(f"no document of kind {ask.kind!r}")
        return ask


@dataclass(frozen=True)
class Kind:
    load: Callable[[int], Model]  # the subject (ObjectDoesNotExist when it is gone)
    key: Callable[[Any, Ask], str]
    compute: Callable[[Any, Ask], Any]


def _period(ask: Ask) -> dict[str, Any]:
    return {"start": ask.start, "end": ask.end, "granularity": ask.granularity}


@dataclass(frozen=True)
class Rollup:
    """A rollup of a team, a cluster or a job group (`name`: the selectors' keyword for it): its document, and its
    costs in minor units (each job's cost rounded, docs/api.md, "Money")."""

    name: str
    document: Callable[..., dict]
    costs_minor: Callable[..., dict]
    cache_key: Callable[..., str]

    def for_finance(self, subject: Any, ask: Ask) -> dict:
        """The rollup as finance tools read it (raises selectors.MixedBasisError)."""
        doc = self.document(**{self.name: subject}, **_period(ask))
        minor = self.costs_minor(**{self.name: subject}, **_period(ask), currency=doc["currency"])
        return for_finance(doc, minor)

    def kind(self, load: Callable[[int], Model]) -> Kind:
        return Kind(
            load=load,
            key=lambda subject, ask: finance_document_key(self.cache_key(**{self.name: subject}, **_period(ask))),
            compute=lambda subject, ask: JSONRenderer().render(money_as_text(self.for_finance(subject, ask))),
        )


ROLLUPS = {
    "team": Rollup("team", selectors.team_rollup_cached, cost_selectors.team_job_costs_minor,
                   selectors.team_rollup_cache_key),
    "cluster": Rollup("cluster", selectors.cluster_rollup_cached, cost_selectors.cluster_job_costs_minor,
                      selectors.cluster_rollup_cache_key),
    "job_group": Rollup("group", selectors.job_group_rollup, cost_selectors.job_group_job_costs_minor,
                        selectors.job_group_rollup_cache_key),
}  # fmt: skip

KINDS: dict[str, Kind] = {
    "team": ROLLUPS["team"].kind(lambda pk: Team.objects.get(pk=pk)),
    "cluster": ROLLUPS["cluster"].kind(lambda pk: Cluster.objects.select_related("site").get(pk=pk)),
    "job_group": ROLLUPS["job_group"].kind(lambda pk: JobGroup.objects.get(pk=pk)),
    "teams_compared": Kind(
        load=lambda pk: get_user_model().objects.get(pk=pk, is_active=True),
        key=lambda user, ask: teams_compared_key(viewer_scope(user), ask.start, ask.end),
        compute=lambda user, ask: compare_selectors.teams_compared(user=user, start=ask.start, end=ask.end),
    ),
}


def kept(ask: Ask, subject: Model) -> tuple[Any, int]:
    """The document `ask` names (of `subject`, loaded by the caller with the caller's permissions), from the cache
    or computed and kept; and the generation it is of: the current one, or, while an ingest is in progress, the
    one it was kept at before (what is made of it is kept under that generation: the page cache's pages). Records
    the ask for `asked_prepare` once it is answered: an ask that fails (a period the data cannot hold, a mixed
    basis) is not prepared again after every ingest. Raises what the computation raises (selectors.MixedBasisError)."""
    kind = KINDS[ask.kind]
    kept = kept_or_computed(kind.key(subject, ask), lambda: kind.compute(subject, ask), KEPT_S, previous=True)
    metric_count(metric=ROLLUP_CACHE, labels=[kept.outcome])
    _asked(ask)
    return kept.value, kept.generation if kept.kept_at is None else kept.kept_at


def _asked(ask: Ask) -> None:
    record = getattr(cache, "sorted_add", None)  # (a cache other than Redis records nothing)
    if record is not None:
        record(ROLLUPS_ASKED_KEY, ask.as_member(), time.time(), keep=settings.FLEETWATT_ROLLUPS_ASKED_KEEP)


@dataclass
class PrepareReport:
    asked: int = 0  # documents asked for within FLEETWATT_ROLLUPS_ASKED_WITHIN_S (up to ..._ASKED_KEEP)
    prepared: int = 0  # computed again
    current: int = 0  # already kept at the current generation (another worker's, or asked meanwhile)
    dropped: int = 0  # no longer there to prepare (a team, cluster, group or user removed; a mixed basis)
    failed: int = 0  # an error, logged
    left: int = 0  # not reached within FLEETWATT_ROLLUPS_PREPARE_BUDGET_S
    seconds: float = 0.0


def asked_prepare(*, now: float | None = None) -> PrepareReport:
    """After an ingest committed: the documents asked for lately, computed again and kept at the current
    generation, most recently asked first, then what PREPARED_AFTER names, within the same budget; then the
    ingest's mark is lifted (documents kept before it are no longer served). Never raises for one document: an
    ingest is not failed by a cache it fills."""
    started_at = ingest_started_at()
    began = time.perf_counter()
    now = time.time() if now is None else now
    top = getattr(cache, "sorted_top", None)
    members: list[str] = (
        top(ROLLUPS_ASKED_KEY, min_score=now - settings.FLEETWATT_ROLLUPS_ASKED_WITHIN_S,
            count=settings.FLEETWATT_ROLLUPS_ASKED_KEEP)
        if top is not None else []
    )  # fmt: skip
    report = PrepareReport(asked=len(members))
    for member in members:
        if time.perf_counter() - began > settings.FLEETWATT_ROLLUPS_PREPARE_BUDGET_S:
            report.left = report.asked - report.prepared - report.current - report.dropped - report.failed
            break
        _prepare_one(member, report)
    for prepare in PREPARED_AFTER:
        try:
            prepare(began + settings.FLEETWATT_ROLLUPS_PREPARE_BUDGET_S)
        except Exception:  # (as for one document: the ingest is not failed by a cache it fills)
            log.exception("%s after the ingest failed", getattr(prepare, "__qualname__", prepare))
    ingest_prepared(started_at)
    report.seconds = time.perf_counter() - began
    if report.asked:
        log.info(
            "rollups after the ingest: %d prepared, %d already current, %d dropped, %d failed, %d left, in %.1fs",
            report.prepared, report.current, report.dropped, report.failed, report.left, report.seconds,
        )  # fmt: skip
    return report


def _prepare_one(member: str, report: PrepareReport) -> None:
    try:
        ask = Ask.from_member(member)
        kind = KINDS[ask.kind]
        subject = kind.load(ask.subject_id)
        kept = kept_or_computed(kind.key(subject, ask), lambda: kind.compute(subject, ask), KEPT_S)
        if kept.kept_at is None:
            report.prepared += 1
        else:
            report.current += 1
    except (ValueError, ObjectDoesNotExist):  # (MixedBasisError is a ValueError: that ask answers 400 now)
        cache.sorted_remove(ROLLUPS_ASKED_KEY, member)  # type: ignore[attr-defined]
        report.dropped += 1
    except Exception:
        log.exception("rollup document %s not prepared", member)
        report.failed += 1
