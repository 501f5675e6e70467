"""The settings refuse a half-set single sign-on at start, and build the backend list from the flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRINT_BACKENDS = "from django.conf import settings; print(settings.AUTHENTICATION_BACKENDS)"
SSO = {"FLEETWATT_OIDC_CLIENT_ID": "fw", "FLEETWATT_OIDC_CLIENT_SECRET": "s", "FLEETWATT_OIDC_ISSUER": "https://idp"}


def _settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATT_OIDC", "OIDC_OP", "FLEETWATT_LOCAL"))}
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {PRINT_BACKENDS}"],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "fleetwatt.test_settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "backends"),
    [
        (
            {},
            "['apps.core.access.login_throttle.LoginThrottleBackend', 'apps.core.backends.PasswordBackend', "
            "'django.contrib.auth.backends.ModelBackend']",
        ),
        (
            SSO,
            "['apps.core.access.login_throttle.LoginThrottleBackend', 'apps.core.backends.PasswordBackend', "
            "'django.contrib.auth.backends.ModelBackend', 'apps.sso.backends.SsoBackend']",
        ),
        (
            {**SSO, "FLEETWATT_LOCAL_LOGIN": "0"},
            "['apps.core.access.login_throttle.LoginThrottleBackend', 'apps.sso.backends.SsoBackend']",
        ),
        (
            {**SSO, "FLEETWATT_LOCAL_LOGIN": "0", "FLEETWATT_BREAK_GLASS_LOGIN": "1"},
            "['apps.core.access.login_throttle.LoginThrottleBackend', 'apps.sso.backends.SsoBackend', "
            "'apps.sso.backends.BreakGlassBackend']",
        ),
    ],
)
def test_the_backends_follow_the_flags(env: dict[str, str], backends: str) -> None:
    done = _settings(env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == backends


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"FLEETWATT_OIDC_CLIENT_ID": "fw", "FLEETWATT_OIDC_ISSUER": "https://idp"},
            "without FLEETWATT_OIDC_CLIENT_SECRET",
        ),
        (
            {
                "FLEETWATT_OIDC_CLIENT_ID": "fw",
                "FLEETWATT_OIDC_CLIENT_SECRET": "s",
                "OIDC_OP_TOKEN_ENDPOINT": "https://t",
            },
            "needs FLEETWATT_OIDC_ISSUER or all four",
        ),
        ({"FLEETWATT_LOCAL_LOGIN": "0"}, "FLEETWATT_LOCAL_LOGIN=0 needs single sign-on"),
    ],
)
def test_a_half_set_configuration_stops_at_start(env: dict[str, str], message: str) -> None:
    done = _settings(env)
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and message in done.stderr
