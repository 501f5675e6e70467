from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.access.authentication import FLEET_WIDE, ReadOnlyForApiTokens
from apps.core.access.policy import acting_user
from apps.core.models import ApiToken
from apps.core.page_cache import CachedListMixin
from apps.core.web.pagination import AuditCursorPagination, FlagCursorPagination
from apps.core.web.params import ID_PATTERN
from apps.jobs.models import Job
from apps.pipeline import decisions
from apps.waste import audit
from apps.waste.filtersets import AuditEntryFilterSet, FlagFilterSet
from apps.waste.models import AuditEntry, Flag

from .serializers import AuditEntrySerializer, ExcludeSerializer, FlagSerializer, ReasonSerializer, ReassignSerializer


class IsAdmin(permissions.BasePermission):
    def has_permission(self, request: Request, view: object) -> bool:
        return bool(request.user and request.user.is_staff)


class FlagViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Findings. Members see those of their teams' jobs; only admins act on them."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = FlagSerializer
    filterset_class = FlagFilterSet
    pagination_class = FlagCursorPagination

    def get_queryset(self) -> QuerySet[Flag]:
        flags = Flag.objects.visible_to(self.request.user).order_by("-created_at", "-id")
        if self.action == "list":
            # The page's columns as rows, no model instance (a job row is 45 columns; the list shows two).
            return flags.values(*FlagSerializer.row_keys())
        return flags.select_related("cluster", "job__team", "gpu")

    def _review(self, request: Request, action_name: str) -> Response:
        flag = self.get_object()  # another team's finding: 404 before anything else
        if isinstance(request.auth, ApiToken):
            raise PermissionDenied("API tokens are read-only.")
        if not request.user.is_staff:
            raise PermissionDenied("Only admins act on findings.")
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            entry = decisions.flag_review(
                actor=request.user, flag=flag, action=action_name, reason=body.validated_data["reason"]
            )
        except audit.AuditError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response(AuditEntrySerializer(entry).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReasonSerializer, responses=AuditEntrySerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        return self._review(request, "acknowledge")

    @extend_schema(request=ReasonSerializer, responses=AuditEntrySerializer)
    @action(detail=True, methods=["post"])
    def dispute(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        return self._review(request, "dispute")


class JobActionViewSet(viewsets.GenericViewSet):
    """Admin decisions on a job: exclude from its team's bill, reassign to a team or job group."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    permission_classes = [permissions.IsAuthenticated, IsAdmin, ReadOnlyForApiTokens]
    queryset = Job.objects.select_related("team", "job_group").order_by("id")

    @extend_schema(request=ExcludeSerializer, responses=AuditEntrySerializer)
    @action(detail=True, methods=["post"])
    def exclude(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        body = ExcludeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            entry = decisions.job_exclude(
                actor=acting_user(request.user), job=self.get_object(), exclude=data["exclude"], reason=data["reason"],
                flag=data.get("flag"),
            )  # fmt: skip
        except audit.AuditError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response(AuditEntrySerializer(entry).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReassignSerializer, responses=AuditEntrySerializer)
    @action(detail=True, methods=["post"])
    def reassign(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        body = ReassignSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            entry = decisions.job_reassign(
                actor=acting_user(request.user), job=self.get_object(), reason=data["reason"], team=data.get("team"),
                job_group=data.get("job_group"), flag=data.get("flag"),
            )  # fmt: skip
        except audit.AuditError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        return Response(AuditEntrySerializer(entry).data, status=status.HTTP_201_CREATED)


class AuditLogViewSet(CachedListMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The append-only audit log (admins and finance, read-only; `?format=csv` to export)."""

    serializer_class = AuditEntrySerializer
    pagination_class = AuditCursorPagination
    permission_classes = FLEET_WIDE
    queryset = AuditEntry.objects.select_related("actor", "job", "gpu").order_by("-at", "-id")
    filterset_class = AuditEntryFilterSet
