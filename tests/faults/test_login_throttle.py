"""Unlimited password guessing: 200 wrong admin passwords in 66 s on `/accounts/login/` and the admin's login
were all answered. Logins are now throttled per user name and per client address (django-axes, its
counts in Postgres, so every gunicorn worker sees the same lock), with a lockout message on the page; an
admin unlocks a user with `manage.py axes_reset_username` (or the admin's "Access attempts")."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db
LIMIT = getattr(settings, "AXES_FAILURE_LIMIT", 10)
LOGINS = ["/accounts/login/", "/admin/login/"]


@pytest.fixture
def boss() -> User:
    return User.objects.create_user("boss", password="the-right-one", is_staff=True)


def _login(
    path: str, username: str, password: str, address: str = "192.0.2.10", **headers: str
) -> tuple[int, bytes, bool]:
    """One login from a fresh browser: status, page, and whether it ended logged in."""
    client = Client(REMOTE_ADDR=address, **headers)
    response = client.post(path, {"username": username, "password": password})
    return response.status_code, response.content, "_auth_user_id" in client.session


@pytest.mark.parametrize("path", LOGINS)
def test_guessing_one_user_password_locks_that_user_out_from_every_address(boss: User, path: str) -> None:
    # when someone guesses the admin's password from many addresses
    answers = [_login(path, "boss", f"guess-{n}", address=f"198.51.100.{n}") for n in range(LIMIT + 5)]
    # then the first guesses are answered as wrong, and the rest are refused with the lockout page
    assert all(status == 200 and not logged_in for status, _, logged_in in answers[: LIMIT - 1])
    assert all(status == 429 and b"Too many failed logins" in page for status, page, _ in answers[LIMIT:])
    # and even the right password, from an address never seen, does not log the user in
    status, page, logged_in = _login(path, "boss", "the-right-one", address="203.0.113.77")
    assert (status, logged_in) == (429, False) and b"Too many failed logins" in page


@pytest.mark.parametrize("path", LOGINS)
def test_guessing_from_one_address_locks_that_address_out_for_every_user(boss: User, path: str) -> None:
    for n in range(LIMIT):
        _login(path, f"someone-{n}", "guess", address="192.0.2.66")
    status, page, logged_in = _login(path, "boss", "the-right-one", address="192.0.2.66")
    assert (status, logged_in) == (429, False) and b"Too many failed logins" in page
    # another address still logs in
    assert _login(path, "boss", "the-right-one", address="192.0.2.67")[2]


def test_the_lock_is_kept_in_the_database_not_a_process_nor_the_cache(boss: User) -> None:
    from axes.models import AccessAttempt

    for n in range(LIMIT):
        _login("/accounts/login/", "boss", f"guess-{n}", address=f"198.51.100.{n}")
    cache.clear()  # nothing of it lives in Redis or in this process
    assert _login("/accounts/login/", "boss", "the-right-one")[0] == 429
    assert AccessAttempt.objects.filter(username="boss").count() >= LIMIT


def test_an_admin_unlocks_a_user(boss: User) -> None:
    for n in range(LIMIT):
        _login("/accounts/login/", "boss", f"guess-{n}")
    assert _login("/accounts/login/", "boss", "the-right-one", address="192.0.2.99")[0] == 429
    call_command("axes_reset_username", "boss")
    assert _login("/accounts/login/", "boss", "the-right-one", address="192.0.2.99")[2]


def test_a_success_forgets_the_user_earlier_mistakes(boss: User) -> None:
    for _ in range(LIMIT - 1):
        _login("/accounts/login/", "boss", "typo")
    assert _login("/accounts/login/", "boss", "the-right-one")[2]
    for _ in range(LIMIT - 1):
        assert _login("/accounts/login/", "boss", "typo")[0] == 200
    assert _login("/accounts/login/", "boss", "the-right-one")[2]


def test_wrong_passwords_below_the_limit_are_answered_as_wrong(boss: User) -> None:
    status, page, logged_in = _login("/accounts/login/", "boss", "nope")
    assert (status, logged_in) == (200, False) and b"didn't match" in page


def test_behind_a_trusted_proxy_the_address_it_saw_is_locked_not_what_the_client_wrote(boss: User, settings) -> None:
    # given one reverse proxy, which appends the address it saw to X-Forwarded-For
    settings.FLEETWATT_TRUSTED_PROXIES = 1
    # when a guesser behind it writes a new address of its own into the header before each guess
    for n in range(LIMIT):
        _login(
            "/accounts/login/", f"someone-{n}", "guess", "10.0.0.2", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}, 192.0.2.50"
        )
    # then its own address is locked, and another client behind the same proxy is not
    assert _login("/accounts/login/", "boss", "the-right-one", "10.0.0.2", HTTP_X_FORWARDED_FOR="192.0.2.50")[0] == 429
    assert _login("/accounts/login/", "boss", "the-right-one", "10.0.0.2", HTTP_X_FORWARDED_FOR="192.0.2.51")[2]


def test_without_a_trusted_proxy_a_client_written_forwarded_header_is_ignored(boss: User) -> None:
    for n in range(LIMIT):
        _login("/accounts/login/", f"someone-{n}", "guess", "192.0.2.70", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
    assert (
        _login("/accounts/login/", "boss", "the-right-one", "192.0.2.70", HTTP_X_FORWARDED_FOR="198.51.100.1")[0] == 429
    )
