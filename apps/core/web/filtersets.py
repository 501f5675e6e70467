"""django-filter's FilterSet, made per class rather than per request.

django-filter deep-copies every filter of a FilterSet for each request, builds a form field per filter and a
new form class from them: for the jobs list's thirteen filters that is a third of a request's CPU. Here each
request gets shallow copies of the filters (their own `parent`, `model` and method binding, the rest shared
and only read) and the form class built once per FilterSet class. The form itself is still made per request
(Django copies its fields). A FilterSet whose fields depend on the request (a filter with a callable
queryset) keeps django-filter's way. `tests/core/web/test_filtersets.py` compares both on the same input.

Below it, the filters whose values apps.core.web.params reads (a time, a day, a whole number, an id, free text): the API
answers a value they do not take with a 400 naming the filter, a page with its 400 page."""

from __future__ import annotations

import copy
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.http import QueryDict

from . import params


class FilterSet(django_filters.FilterSet):
    # Per FilterSet class (not inherited: a subclass has filters of its own): its form class, once built.
    _form_classes: dict[type, type[forms.Form]] = {}

    def __init__(
        self,
        data: QueryDict | None = None,
        queryset: QuerySet[Any] | None = None,
        *,
        request: Any = None,
        prefix: str | None = None,
    ) -> None:
        if _depends_on_request(self.base_filters.values()):
            super().__init__(data, queryset, request=request, prefix=prefix)
            return
        # django-filter 26's BaseFilterSet.__init__, with shallow copies in place of copy.deepcopy.
        if queryset is None:
            queryset = self._meta.model._default_manager.all()
        self.is_bound = data is not None
        self.data = data or QueryDict()
        self.queryset = queryset
        self.request = request
        self.form_prefix = prefix
        self.filters = {
            name: _bound_copy(f, parent=self, model=queryset.model) for name, f in self.base_filters.items()
        }

    def get_form_class(self) -> type[forms.Form]:
        cls = type(self)
        form_class = FilterSet._form_classes.get(cls)
        if form_class is None:
            form_class = super().get_form_class()
            if not _depends_on_request(self.filters.values()):
                FilterSet._form_classes[cls] = form_class  # two threads may both build it: either is right
        return form_class


def _bound_copy(base: django_filters.Filter, *, parent: FilterSet, model: type) -> django_filters.Filter:
    """A filter for one FilterSet instance: a shallow copy, its method (when named) bound to this copy."""
    clone = copy.copy(base)
    if base.method is not None:
        clone.method = base.method  # the setter binds a FilterMethod to the clone, not to the base filter
    clone.model = model
    clone.parent = parent
    return clone


def _depends_on_request(filters: Any) -> bool:
    """A filter with a callable queryset makes its form field per request (and writes it to `extra`)."""
    return any(callable(getattr(f, "queryset", None)) for f in filters)


class _ParsedFormField(forms.Field):
    """A form field whose value apps.core.web.params reads (`parse`); empty: None."""

    def parse(self, raw: str) -> Any:
        raise NotImplementedError

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            return None
        try:
            return self.parse(value if isinstance(value, str) else str(value))
        except params.QueryError as exc:
            # As a parameter: the message may quote a "%", and django-filter formats every message with its params.
            raise forms.ValidationError("%(message)s", code="invalid", params={"message": exc.sentence}) from None


class MomentFormField(_ParsedFormField):
    """A time (apps.core.web.params.moment), in UTC."""

    def parse(self, raw: str) -> Any:
        return params.moment(raw, name="")


class DayFormField(_ParsedFormField):
    def parse(self, raw: str) -> Any:
        return params.day(raw, name="")


class TextFormField(_ParsedFormField):
    """One line of free text, kept as sent (not stripped: "x\\n" is refused, not read as "x")."""

    def __init__(self, *, max_length: int = params.TEXT_MAX, **kwargs: Any) -> None:
        self.max_length = max_length
        super().__init__(**kwargs)

    def parse(self, raw: str) -> Any:
        return params.text(raw, name="", max_length=self.max_length)


class WholeNumberFormField(_ParsedFormField):
    def __init__(self, *, min_value: int = 0, max_value: int = params.ID_MAX, **kwargs: Any) -> None:
        self.min_value, self.max_value = min_value, max_value
        super().__init__(**kwargs)

    def parse(self, raw: str) -> Any:
        return params.whole_number(raw, name="", low=self.min_value, high=self.max_value)


class IdChoiceField(forms.ModelChoiceField):
    """An object by its id, written in ASCII digits (Django's own takes full-width digits, and "12\\n" for 12)."""

    def to_python(self, value: Any) -> Any:
        if value not in self.empty_values:
            try:
                params.object_id(value if isinstance(value, str) else str(value), name="")
            except params.QueryError:
                raise forms.ValidationError(self.error_messages["invalid_choice"], code="invalid_choice") from None
        return super().to_python(value)


class MomentFilter(django_filters.IsoDateTimeFilter):
    field_class = MomentFormField


class DayFilter(django_filters.DateFilter):
    field_class = DayFormField


class TextFilter(django_filters.CharFilter):
    field_class = TextFormField


class WholeNumberFilter(django_filters.NumberFilter):
    field_class = WholeNumberFormField


class IdChoiceFilter(django_filters.ModelChoiceFilter):
    field_class = IdChoiceField
