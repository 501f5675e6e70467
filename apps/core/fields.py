"""Serializer fields shared by the APIs."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class NameField(serializers.SlugRelatedField):
    """An object by its name; a value Postgres cannot hold (a NUL character) is simply not found."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\0"))
        return super().to_internal_value(data)
