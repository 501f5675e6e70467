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
# `make test` runs the suite in two processes (pytest-xdist): each its own database (pytest-django names it) and its
# own Redis database, so one process's cache.clear() or queued task never reaches the other's. The processes a test
# starts (a worker, a server) inherit the moved URL and the mark that it was moved, and do not move it again.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
if _worker != "gw0" and os.environ.get("FLEETWATT_TEST_REDIS_MOVED_FOR") != _worker:
    _base, _, _db = REDIS_URL.rpartition("/")
    REDIS_URL = f"{_base}/{(int(_db or 0) - 8 * int(_worker.removeprefix('gw'))) % 16}"
    os.environ["FLEETWATT_TEST_REDIS_URL"] = REDIS_URL
    os.environ["FLEETWATT_TEST_REDIS_MOVED_FOR"] = _worker
CELERY_BROKER_URL = REDIS_URL
CACHES = {"default": {**CACHES["default"], "LOCATION": REDIS_URL}}  # noqa: F405  # the same fail-open cache
# The pages' tests count the queries and read the figures of a page as it is made; the cache of made pages is on
# where it is tested (tests/dashboard/test_page_cache.py).
FLEETWATT_PAGE_CACHE_S = 0
