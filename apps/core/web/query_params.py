"""Unknown query parameters on a list are a clear 400 naming them, not silently ignored: a finance tool
that misspells `?stat=failed` must not get every job back as if it had filtered."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

# Read by DRF itself (content negotiation) on every endpoint.
ALWAYS_ALLOWED = frozenset({"format"})


class StrictQueryParamsMixin:
    """For a viewset's `list` (its streamed CSV too): every query parameter must be a filter of its
    filterset, a parameter of its pagination, `format`, or one the viewset names in `extra_query_params`.
    Checked in `initial`, after authentication: an anonymous caller still gets its 401 first."""

    extra_query_params: frozenset[str] = frozenset()
    # The actions whose query parameters are checked: the list, and any list-like action a viewset adds
    # (its pagination and filterset are the action's own, as DRF sets them from @action's arguments).
    strict_actions: frozenset[str] = frozenset({"list"})

    def allowed_query_params(self) -> frozenset[str]:
        view: Any = self
        allowed = set(ALWAYS_ALLOWED | self.extra_query_params)
        filterset = getattr(view, "filterset_class", None)
        if filterset is not None:
            allowed |= set(filterset.base_filters)
        paginator = getattr(view, "paginator", None)
        for name in ("cursor_query_param", "page_size_query_param", "page_query_param", "limit_query_param",
                     "offset_query_param"):  # fmt: skip
            param = getattr(paginator, name, None)
            if param:
                allowed.add(param)
        return frozenset(allowed)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if getattr(self, "action", None) not in self.strict_actions:
            return
        allowed = self.allowed_query_params()
        unknown = sorted(set(request.query_params) - allowed)
        if unknown:
            raise ValidationError(
                {"detail": f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)} "
                           f"(this list takes: {', '.join(sorted(allowed))})."}
            )  # fmt: skip
