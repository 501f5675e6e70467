"""fleetwatt settings. Every value comes from the environment; `.env.example` lists them all."""

import ipaddress
from pathlib import Path

import environ
import plotly
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="insecure-development-key-change-me" if DEBUG else "")
if not SECRET_KEY:
    raise environ.ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off.")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "apps.core",
    "apps.fleet",
    "apps.jobs",
    "apps.telemetry",
    "apps.carbon",
    "apps.config",
    "apps.waste",
    "apps.rollups",
    "apps.pipeline",
    "apps.simulator",
    "apps.dashboard",
    "apps.reports",
    "apps.schedulers",
    "apps.sso",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",  # first, as django-prometheus asks
    "django.middleware.security.SecurityMiddleware",
    "apps.core.web.middleware.SecurityHeadersMiddleware",  # the CSP on every answer, no-store on authenticated ones
    "apps.core.web.middleware.StyledErrorPagesMiddleware",  # outermost: it sees the 404 page Django made
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last but axes's (appended below: axes asks to be last), so it sees axes's lockout answers as sent.
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "fleetwatt.urls"
WSGI_APPLICATION = "fleetwatt.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/fleetwatt")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# Keep connections between requests: opening one costs more than most of our requests.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DJANGO_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A database that does not answer fails a request (a 503) or a task (retried) within seconds, not minutes.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env.int("DJANGO_DB_CONNECT_TIMEOUT_S", default=5)
)
# Least privilege (apps/core/access/database_roles.py): the app connects as DATABASE_URL's role, which owns nothing;
# `manage.py migrate --database owner` runs as DATABASE_OWNER_URL's role, which owns the tables and then
# grants FLEETWATT_DB_APP_ROLE what the app needs (the audit log: read and append only).
if env.str("DATABASE_OWNER_URL", default=""):
    DATABASES["owner"] = env.db("DATABASE_OWNER_URL")
    DATABASES["owner"]["TEST"] = {"MIRROR": "default"}
FLEETWATT_DB_APP_ROLE = env.str("FLEETWATT_DB_APP_ROLE", default="")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# Plotly's JavaScript is served from the plotly package itself: no CDN, no copy in the repo.
STATICFILES_DIRS = [
    BASE_DIR / "frontend" / "static",
    ("vendor/plotly", Path(plotly.__file__).parent / "package_data"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:home"  # a team member lands on their team, others on the fleet
LOGOUT_REDIRECT_URL = "login"

# Production hardening: on whenever DEBUG is off (`manage.py check --deploy` passes).
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0 if DEBUG else 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.core.access.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apps.core.access.authentication.ReadOnlyForApiTokens",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["apps.core.access.authentication.ApiTokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api_token": env.str("FLEETWATT_API_TOKEN_RATE", default="600/min")},
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
        "apps.core.web.renderers.UnitCSVRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "apps.core.web.pagination.CappedPageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "fleetwatt API",
    "DESCRIPTION": "GPU fleet energy, cost and carbon per job, with split method and coverage.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "apps.core.web.schema.describe_fields"],
}

# --- Access: finance read-only, strict bodies, the login throttle (docs/operations.md, "Access"). ---
# Finance reads everything and writes nothing, whatever its credentials (apps.core.access.policy).
REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"] = [
    *REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"],  # type: ignore[misc]  # the list above (mypy sees object)
    "apps.core.access.authentication.ReadOnlyForFinance",
]
# DRF's JSON parser, with a body nested past the recursion limit a 400 instead of a 500.
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = [
    "apps.core.web.parsers.JSONParser",
    "rest_framework.parsers.FormParser",
    "rest_framework.parsers.MultiPartParser",
]
# Logins (the app's and the admin's) are throttled by django-axes, per user name and per client address:
# FLEETWATT_LOGIN_FAILURE_LIMIT failures of either lock it for FLEETWATT_LOGIN_LOCKOUT_MIN minutes (each
# further failure starts them again). The counts are rows in Postgres, shared by every gunicorn worker.
INSTALLED_APPS += ["axes"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]  # last, as axes asks
# The password login is apps.core.backends.PasswordBackend (Django's, loading a session's user in one query);
# Django's own stays listed after it, only to load the sessions logged in before that backend existed (a session
# names its backend); it never checks a password (PasswordBackend stops a refused login).
_LEGACY_PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"
AUTHENTICATION_BACKENDS = [
    "apps.core.access.login_throttle.LoginThrottleBackend",
    "apps.core.backends.PasswordBackend",
    _LEGACY_PASSWORD_BACKEND,
]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own: a user name, or an address
AXES_FAILURE_LIMIT = env.int("FLEETWATT_LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = env.int("FLEETWATT_LOGIN_LOCKOUT_MIN", default=15) / 60  # hours, as axes reads a number
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "auth/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "apps.core.access.login_throttle.client_address"
# Single sign-on with OpenID Connect (apps.sso, docs/sso.md): on when a client id is given, with the provider's
# issuer (its endpoints discovered at the first login) or its four endpoints. The groups it claims give
# teams and roles through the config file's `sso` section. FLEETWATT_LOCAL_LOGIN=0 turns the password login
# off (the app's and the admin's); FLEETWATT_BREAK_GLASS_LOGIN=1 opens it again to superusers only.
OIDC_RP_CLIENT_ID = env.str("FLEETWATT_OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("FLEETWATT_OIDC_CLIENT_SECRET", default="")
FLEETWATT_OIDC_ISSUER = env.str("FLEETWATT_OIDC_ISSUER", default="").rstrip("/")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
OIDC_RP_SIGN_ALGO = env.str("FLEETWATT_OIDC_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES = env.str("FLEETWATT_OIDC_SCOPES", default="openid email profile")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env.int("FLEETWATT_OIDC_TIMEOUT_S", default=10)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
FLEETWATT_SSO_ENABLED = bool(OIDC_RP_CLIENT_ID)
FLEETWATT_LOCAL_LOGIN = env.bool("FLEETWATT_LOCAL_LOGIN", default=True)
FLEETWATT_BREAK_GLASS_LOGIN = env.bool("FLEETWATT_BREAK_GLASS_LOGIN", default=False)
if FLEETWATT_SSO_ENABLED and not OIDC_RP_CLIENT_SECRET:
    raise ImproperlyConfigured("FLEETWATT_OIDC_CLIENT_ID is set without FLEETWATT_OIDC_CLIENT_SECRET")
_OIDC_ENDPOINTS = (OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, OIDC_OP_JWKS_ENDPOINT)
if FLEETWATT_SSO_ENABLED and not FLEETWATT_OIDC_ISSUER and not all(_OIDC_ENDPOINTS):
    raise ImproperlyConfigured("single sign-on needs FLEETWATT_OIDC_ISSUER or all four OIDC_OP_*_ENDPOINT settings")
if not FLEETWATT_LOCAL_LOGIN and not FLEETWATT_SSO_ENABLED:
    raise ImproperlyConfigured("FLEETWATT_LOCAL_LOGIN=0 needs single sign-on (FLEETWATT_OIDC_CLIENT_ID) to log in")
if FLEETWATT_SSO_ENABLED:
    AUTHENTICATION_BACKENDS += ["apps.sso.backends.SsoBackend"]
if not FLEETWATT_LOCAL_LOGIN:
    AUTHENTICATION_BACKENDS.remove("apps.core.backends.PasswordBackend")
    AUTHENTICATION_BACKENDS.remove(_LEGACY_PASSWORD_BACKEND)
    if FLEETWATT_BREAK_GLASS_LOGIN:
        AUTHENTICATION_BACKENDS.append("apps.sso.backends.BreakGlassBackend")
# Reverse proxies in front of gunicorn that append the client's address to X-Forwarded-For (0: none, the
# address is the connection's own; 1: one proxy such as nginx). Only trusted hops are read: a client can
# write anything before them.
FLEETWATT_TRUSTED_PROXIES = env.int("FLEETWATT_TRUSTED_PROXIES", default=0)

# Celery: Redis broker, JSON only, one task at a time per worker process.
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
# The throttles' counters live in Redis, shared by every web process. The cache fails open
# (apps/core/fail_open_cache.py): with Redis unreachable a read is a miss and a write is skipped, so sessions
# come from Postgres, API tokens pass unthrottled and rollups are computed, instead of a 500 per request.
# A Redis that hangs costs one timeout per process every FLEETWATT_CACHE_RETRY_S.
CACHES = {
    "default": {
        "BACKEND": "apps.core.fail_open_cache.FailOpenRedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {
            "socket_connect_timeout": env.float("FLEETWATT_REDIS_TIMEOUT_S", default=1.0),
            "socket_timeout": env.float("FLEETWATT_REDIS_TIMEOUT_S", default=1.0),
            "retry_after_s": env.float("FLEETWATT_CACHE_RETRY_S", default=5.0),
        },
    }
}
# Sessions read from Redis, written through to Postgres: a dashboard request costs no session query. With
# Redis down they are read from Postgres: nobody is logged out.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Pool processes per worker; unset, one per CPU of the machine, which in a container is the node's, not the pod's.
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=None)
# Every task is safe to run twice (docs/architecture.md): a task is acknowledged once it has run, and one
# whose pool process died (SIGKILL, the OOM killer) goes back to the queue instead of being dropped.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=30 * 60)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=25 * 60)
# Transient errors (an unreachable Prometheus, a database that is down or restarting) are retried with
# exponential backoff from this many seconds up to the maximum, with jitter, at most this many times.
FLEETWATT_TASK_RETRY_BACKOFF_S = env.int("FLEETWATT_TASK_RETRY_BACKOFF_S", default=30)
FLEETWATT_TASK_RETRY_BACKOFF_MAX_S = env.int("FLEETWATT_TASK_RETRY_BACKOFF_MAX_S", default=600)
FLEETWATT_TASK_MAX_RETRIES = env.int("FLEETWATT_TASK_MAX_RETRIES", default=10)
# Redis hands a task nobody acknowledged (its worker died whole, the machine went away) to another worker
# after this long: longer than a task may run plus the longest retry wait (a retry sits unacknowledged at
# its worker until it is due), or a running task would be started twice.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int(
        "CELERY_VISIBILITY_TIMEOUT", default=CELERY_TASK_TIME_LIMIT + FLEETWATT_TASK_RETRY_BACKOFF_MAX_S + 5 * 60
    ),
}
CELERY_TIMEZONE = "UTC"
# The ingest fanned out (apps.pipeline.fanout): beat queues each cluster's closed hours as one task per hour
# and shard, on the cluster's queue, for any number of workers; 0: one task ingests every cluster in turn.
FLEETWATT_INGEST_FANOUT = env.bool("FLEETWATT_INGEST_FANOUT", default=True)
# Hours in one batch (derived at once); a longer catch-up takes several beats.
FLEETWATT_INGEST_BATCH_HOURS = env.int("FLEETWATT_INGEST_BATCH_HOURS", default=24)
# A batch untouched this long is derived as far as it was written and its missing parts queued again.
FLEETWATT_INGEST_STALL_S = env.int("FLEETWATT_INGEST_STALL_S", default=15 * 60)
# The queue of the ingest's tasks, and clusters pinned to their own ("cluster=queue,...": a worker started
# with `-Q <queue>` near that cluster's Prometheus takes them).
FLEETWATT_INGEST_QUEUE = env.str("FLEETWATT_INGEST_QUEUE", default="celery")
FLEETWATT_INGEST_CLUSTER_QUEUES = env.dict("FLEETWATT_INGEST_CLUSTER_QUEUES", default={})
CELERY_BEAT_SCHEDULE = {
    "ingest-closed-hours": {
        "task": "apps.telemetry.tasks."
        + ("ingest_dispatch_task" if FLEETWATT_INGEST_FANOUT else "ingest_closed_hours_task"),
        # A few minutes past the hour, so the hour's last scrapes have landed in Prometheus.
        "schedule": crontab(minute=env.int("FLEETWATT_INGEST_MINUTE", default=5)),
    },
}

# fleetwatt itself.
FLEETWATT_PROMETHEUS_URL = env.str("FLEETWATT_PROMETHEUS_URL", default="http://127.0.0.1:9090")
FLEETWATT_CLUSTER = env.str("FLEETWATT_CLUSTER", default="default")
FLEETWATT_SCRAPE_INTERVAL_S = env.int("FLEETWATT_SCRAPE_INTERVAL_S", default=15)
FLEETWATT_PROMETHEUS_TIMEOUT_S = env.float("FLEETWATT_PROMETHEUS_TIMEOUT_S", default=60.0)
# How far back the ingest looks for a counter's last value before an hour: a counter with no sample
# in this window is taken as new (counted from 0), so scrape gaps longer than this would count twice.
FLEETWATT_COUNTER_LOOKBACK_S = env.int("FLEETWATT_COUNTER_LOOKBACK_S", default=3 * 3600)
# The per-hour tables are partitioned by UTC month (apps.telemetry.partitions): beat makes this many months
# ahead; `manage.py hour_rows_expire` drops the months older than the keep setting (0: keep every month).
FLEETWATT_HOUR_PARTITIONS_AHEAD_MONTHS = env.int("FLEETWATT_HOUR_PARTITIONS_AHEAD_MONTHS", default=3)
FLEETWATT_HOUR_ROWS_KEEP_MONTHS = env.int("FLEETWATT_HOUR_ROWS_KEEP_MONTHS", default=0)
# Hours the beat task catches up at most in one run (the rest on its next run).
FLEETWATT_CATCHUP_MAX_HOURS = env.int("FLEETWATT_CATCHUP_MAX_HOURS", default=24 * 7)
# `manage.py ingest` covers at most this many hours per cluster in one run (a typo of a year is refused).
FLEETWATT_INGEST_MAX_HOURS = env.int("FLEETWATT_INGEST_MAX_HOURS", default=24 * 366)
# A stored hour is not replaced by a source answer that lacks one of its GPUs or has less than this share
# of its energy (the source lost data: retention, a wrong URL, a dead exporter), unless `ingest --force`.
FLEETWATT_INGEST_MIN_SOURCE_RATIO = env.float("FLEETWATT_INGEST_MIN_SOURCE_RATIO", default=0.99)
# Largest files `apply_config` and `import_intensity` read (bytes).
FLEETWATT_CONFIG_MAX_BYTES = env.int("FLEETWATT_CONFIG_MAX_BYTES", default=2 * 1024 * 1024)
FLEETWATT_INTENSITY_MAX_BYTES = env.int("FLEETWATT_INTENSITY_MAX_BYTES", default=32 * 1024 * 1024)
FLEETWATT_COVERAGE_THRESHOLD = env.float("FLEETWATT_COVERAGE_THRESHOLD", default=0.95)
FLEETWATT_CONSERVATION_THRESHOLD = env.float("FLEETWATT_CONSERVATION_THRESHOLD", default=0.02)
FLEETWATT_API_MAX_PAGE_SIZE = env.int("FLEETWATT_API_MAX_PAGE_SIZE", default=1000)
# Pages of the API's lists and sums are kept rendered until the data they show changes, and at most this
# long (apps.core.page_cache); 0: every page computed on each request.
FLEETWATT_API_PAGE_CACHE_S = env.int("FLEETWATT_API_PAGE_CACHE_S", default=300)
# The dashboard's pages are kept rendered for each viewer until the data they show changes, within the hour, and at
# most this long (apps.dashboard.page_cache); 0: every page made on each request.
FLEETWATT_PAGE_CACHE_S = env.int("FLEETWATT_PAGE_CACHE_S", default=900)
# The rollups' documents asked for within ASKED_WITHIN_S (the ASKED_KEEP most recent) are prepared again after each
# ingest, for PREPARE_BUDGET_S at most; until they are, one kept before the ingest is served, for STALE_S at most
# (0: never; apps.rollups.documents).
FLEETWATT_ROLLUPS_ASKED_WITHIN_S = env.int("FLEETWATT_ROLLUPS_ASKED_WITHIN_S", default=24 * 3600)
FLEETWATT_ROLLUPS_ASKED_KEEP = env.int("FLEETWATT_ROLLUPS_ASKED_KEEP", default=200)
FLEETWATT_ROLLUPS_PREPARE_BUDGET_S = env.float("FLEETWATT_ROLLUPS_PREPARE_BUDGET_S", default=60.0)
FLEETWATT_ROLLUPS_STALE_S = env.int("FLEETWATT_ROLLUPS_STALE_S", default=300)
# Waste findings.
FLEETWATT_HOG_MIN_MEMORY_BYTES = env.int("FLEETWATT_HOG_MIN_MEMORY_BYTES", default=1024**3)
FLEETWATT_HOG_MAX_SM = env.float("FLEETWATT_HOG_MAX_SM", default=0.01)
FLEETWATT_HOG_MIN_SECONDS = env.int("FLEETWATT_HOG_MIN_SECONDS", default=1800)
FLEETWATT_IDLE_MAX_SM = env.float("FLEETWATT_IDLE_MAX_SM", default=0.05)
FLEETWATT_IDLE_MIN_SECONDS = env.int("FLEETWATT_IDLE_MIN_SECONDS", default=3600)
# Carbon and cost.
FLEETWATT_INTENSITY_FILL_HOURS = env.int("FLEETWATT_INTENSITY_FILL_HOURS", default=3)
FLEETWATT_IDLE_SHARED_TO_TEAMS = env.bool("FLEETWATT_IDLE_SHARED_TO_TEAMS", default=False)
FLEETWATT_SHIFT_DEADLINE_H = env.int("FLEETWATT_SHIFT_DEADLINE_H", default=24)
# When to run (docs/arithmetic.md, "When to run"): a zone's profile is the mean of its stored intensity by hour of
# the week over this many weeks (where no imported forecast covers a run); a flexible group's typical run is made
# from its last this-many runs that ended in those weeks.
FLEETWATT_FORECAST_PROFILE_WEEKS = env.int("FLEETWATT_FORECAST_PROFILE_WEEKS", default=4)
FLEETWATT_WHEN_TYPICAL_RUNS = env.int("FLEETWATT_WHEN_TYPICAL_RUNS", default=5)
# The FOCUS export's names (/api/focus/, docs/api.md "FOCUS export"): who bills the teams, and the currency of
# clusters without a site.
FLEETWATT_FOCUS_BILLING_ACCOUNT_ID = env.str("FLEETWATT_FOCUS_BILLING_ACCOUNT_ID", default="fleetwatt")
FLEETWATT_FOCUS_BILLING_ACCOUNT_NAME = env.str("FLEETWATT_FOCUS_BILLING_ACCOUNT_NAME", default="GPU fleet")
FLEETWATT_FOCUS_INVOICE_ISSUER_NAME = env.str("FLEETWATT_FOCUS_INVOICE_ISSUER_NAME", default="Platform team")
FLEETWATT_FOCUS_PROVIDER_NAME = env.str("FLEETWATT_FOCUS_PROVIDER_NAME", default="Platform team")
FLEETWATT_FOCUS_PUBLISHER_NAME = env.str("FLEETWATT_FOCUS_PUBLISHER_NAME", default="Platform team")
FLEETWATT_FOCUS_DEFAULT_CURRENCY = env.str("FLEETWATT_FOCUS_DEFAULT_CURRENCY", default="EUR")
# With DEBUG on, an error is the site's 500 page and the traceback goes to the log; 1: Django's traceback page.
FLEETWATT_DEBUG_TRACEBACK_PAGES = env.bool("FLEETWATT_DEBUG_TRACEBACK_PAGES", default=False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("FLEETWATT_LOG_LEVEL", default="INFO")},
    # django-axes says hello at every process start and logs each login at INFO: lockouts are WARNING.
    "loggers": {"axes": {"level": "WARNING"}},
}

# Weekly waste reports by email (apps.reports). SMTP from the environment; console backend by default.
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_TIMEOUT = 30
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="fleetwatt <fleetwatt@localhost>")
# Absolute links in emails (no request to build them from).
FLEETWATT_BASE_URL = env.str("FLEETWATT_BASE_URL", default="http://127.0.0.1:8000")
# When a team's report for the week that ended goes out, in its site's time zone: weekday 0 = Monday.
FLEETWATT_REPORT_WEEKDAY = env.int("FLEETWATT_REPORT_WEEKDAY", default=0)
FLEETWATT_REPORT_HOUR = env.int("FLEETWATT_REPORT_HOUR", default=7)
# Hourly: each run sends the reports whose local send time has passed and that are not yet sent.
CELERY_BEAT_SCHEDULE["hour-partitions-ahead"] = {
    "task": "apps.telemetry.tasks.hour_partitions_ahead_task",
    "schedule": crontab(minute=45, hour=3),
}
CELERY_BEAT_SCHEDULE["weekly-waste-reports"] = {
    "task": "apps.reports.tasks.send_weekly_reports_task",
    "schedule": crontab(minute=20),
}
# Each hour, every team's when-to-run hints as of that hour are kept, to be checked against the intensity that comes.
CELERY_BEAT_SCHEDULE["when-to-run-hints"] = {
    "task": "apps.carbon.tasks.record_when_to_run_hints_task",
    "schedule": crontab(minute=env.int("FLEETWATT_WHEN_HINTS_MINUTE", default=15)),
}

# --- Headers and tokens (docs/operations.md, "Headers and tokens"). ---
# The Content-Security-Policy of every answer: the site's own scripts only (no inline script: a page's data comes
# through json_script, which is not run), styles inline too (Plotly writes its own), images as data: and blob:
# URLs (Plotly's), Redoc's worker from a blob:, no frame around any page. "" sends none.
FLEETWATT_CONTENT_SECURITY_POLICY = env.str(
    "FLEETWATT_CONTENT_SECURITY_POLICY",
    default="default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'",
)
# A new API token's life in days, as the Tokens page offers it first (its creator may choose another, or none);
# finance tools run unattended, so a year: one rotation a year, in step with the yearly audit of who holds one.
FLEETWATT_API_TOKEN_DAYS = env.int("FLEETWATT_API_TOKEN_DAYS", default=365)
# /api/schema/ and /api/docs/ for logged-in users and API tokens only (0: for anyone). They hold no
# data, but they map every route.
FLEETWATT_API_DOCS_LOGIN = env.bool("FLEETWATT_API_DOCS_LOGIN", default=True)

# --- Degraded dependencies: what /healthz reports (docs/operations.md, "Degraded dependencies"). ---
# Its answer is kept this many seconds per process: an unauthenticated caller cannot make the app ask
# every Prometheus more often than that.
FLEETWATT_HEALTHZ_CACHE_S = env.float("FLEETWATT_HEALTHZ_CACHE_S", default=5.0)
# How long each check (a Redis PING, a Prometheus query) may take.
FLEETWATT_HEALTHZ_TIMEOUT_S = env.float("FLEETWATT_HEALTHZ_TIMEOUT_S", default=2.0)
# A cluster whose ingest is more hours behind the last closed hour than this fails /healthz (beat ingests
# each hour a few minutes past the next, so 1 is normal).
FLEETWATT_INGEST_MAX_LAG_H = env.int("FLEETWATT_INGEST_MAX_LAG_H", default=3)

# --- fleetwatt's own metrics at /metrics (docs/operations.md, "fleetwatt's own metrics"). ---
# django-prometheus counts requests (middleware above) and queries (its database engine: it only wraps the
# cursors psycopg makes; apps.core.db.bulk's binary cursor is made apart and so is not counted).
INSTALLED_APPS += ["django_prometheus"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "django_prometheus.db.backends.postgresql"
# Who may read /metrics: `Authorization: Bearer <token>`, or a client address (apps.core.access.login_throttle's,
# behind FLEETWATT_TRUSTED_PROXIES) in one of these networks. Neither set: /metrics answers 403 saying so.
FLEETWATT_METRICS_TOKEN = env.str("FLEETWATT_METRICS_TOKEN", default="")
FLEETWATT_METRICS_ALLOW = env.list("FLEETWATT_METRICS_ALLOW", default=[])
for _cidr in FLEETWATT_METRICS_ALLOW:  # a typo stops the start, not every scrape
    ipaddress.ip_network(_cidr.strip())

# --- Scheduler accounting (apps.schedulers, docs/schedulers.md): each job's state, exit code, allocation. ---
# Each run re-reads this many hours before a cluster's watermark, so that jobs which were running or pending
# at the last read get their final state.
FLEETWATT_SCHEDULER_LOOKBACK_H = env.int("FLEETWATT_SCHEDULER_LOOKBACK_H", default=48)
# How long one sacct run (or slurmrestd request) may take before the cluster's sync fails for this run.
FLEETWATT_SCHEDULER_TIMEOUT_S = env.float("FLEETWATT_SCHEDULER_TIMEOUT_S", default=120.0)
# The Kubernetes pod labels a job keeps (Job.labels, `k8s_pod_label` team rules), as Kubernetes names them;
# kube-state-metrics exports only those its --metric-labels-allowlist=pods=[...] names.
FLEETWATT_K8S_POD_LABELS = env.list("FLEETWATT_K8S_POD_LABELS", default=["team", "app"])
# Hourly, before the ingest's minute, so an hour's ingest finds the states of the jobs that ended in it.
CELERY_BEAT_SCHEDULE["sync-schedulers"] = {
    "task": "apps.schedulers.tasks.sync_schedulers_task",
    "schedule": crontab(minute=env.int("FLEETWATT_SCHEDULER_MINUTE", default=2)),
}
