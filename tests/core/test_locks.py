"""apps.core.locks: the one list of the advisory locks' keys; no two the same, none written anywhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.db import connection

from apps.core import locks

APPS = Path(__file__).resolve().parents[2] / "apps"


def test_no_two_namespaces_are_the_same_and_each_is_a_postgres_int() -> None:
    # given the namespaces of the locks on two ints
    keys = list(locks.NAMESPACES.values())
    # then each is its own, and fits the int4 Postgres takes
    assert len(set(keys)) == len(keys)
    assert all(0 <= key < 2**31 for key in keys)


def test_the_list_names_every_namespace_it_defines() -> None:
    defined = {name: value for name, value in vars(locks).items() if name.isupper() and isinstance(value, int)}
    assert {n: v for n, v in defined.items() if n != "PARTITIONS"} == locks.NAMESPACES


@pytest.mark.django_db
def test_the_locks_on_one_key_are_not_the_same() -> None:
    # given the keys Postgres locks on: the number, and the hashes of the names
    with connection.cursor() as cursor:
        cursor.execute("SELECT hashtext(%s)", [locks.CONFIG_APPLY])
        config_apply = cursor.fetchone()[0]
    # then they differ
    assert config_apply != locks.PARTITIONS


@pytest.mark.django_db
def test_the_partition_maker_locks_the_listed_key() -> None:
    # given the SQL function the migrations installed
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'fleetwatt_hour_partitions_ensure'")
        (source,) = cursor.fetchone()
    # then it takes the key listed (it cannot import it: it is SQL)
    assert f"pg_advisory_xact_lock({locks.PARTITIONS})" in source


def _constants(path: Path) -> set[object]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)}


def test_no_module_but_the_list_writes_a_key() -> None:
    # given every key of the list
    keys = {*locks.NAMESPACES.values(), locks.PARTITIONS, locks.CONFIG_APPLY, locks.INTENSITY}
    # then no other module of the apps (their migrations aside: SQL of their time) writes one of them
    written = {
        str(path.relative_to(APPS)): sorted(map(str, keys & _constants(path)))
        for path in APPS.rglob("*.py")
        if "migrations" not in path.parts and path.name != "locks.py"
    }
    assert {path: found for path, found in written.items() if found} == {}
