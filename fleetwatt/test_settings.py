"""Settings for the test suite: the real Postgres, Redis and Prometheus, and fixed test secrets."""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-not-a-secret")
os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "0")

from .settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests

STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
WHITENOISE_USE_FINDERS = True

# Tests use their own Redis database, so a running demo worker never takes a test's tasks.
REDIS_URL = os.environ.get("FLEETWATT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CELERY_BROKER_URL = REDIS_URL
CACHES = {"default": {**CACHES["default"], "LOCATION": REDIS_URL}}  # noqa: F405  # the same fail-open cache
