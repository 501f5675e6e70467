from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from apps.core.web.views import ApiDocsView, ApiSchemaView
from apps.ops.metrics_views import metrics
from apps.ops.views import healthz
from apps.sso import views as sso_views

# A database that cannot be reached is a 503; the API's errors are JSON (apps.core.web.views.server_error).
handler500 = "apps.core.web.views.server_error"
# A request that cannot be read (a bad Host header, a form too large): the site's page, JSON under /api/.
handler400 = "apps.core.web.views.bad_request"
# The site's own pages for 403 and 404 (in its layout), JSON under /api/.
handler403 = "apps.core.web.views.permission_denied"
handler404 = "apps.core.web.views.page_not_found"

urlpatterns = [
    path("admin/login/", sso_views.admin_login),  # before the admin's own: one login page when passwords are off
    path("admin/", admin.site.urls),
    path("accounts/login/", sso_views.LoginView.as_view(), name="login"),
    path("accounts/sso/", include("apps.sso.urls")),  # single sign-on (docs/sso.md)
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("apps.jobs.api.urls")),
    path("api/", include("apps.rollups.api.urls")),
    path("api/", include("apps.fleet.api.urls")),
    path("api/", include("apps.waste.api.urls")),
    path("api/", include("apps.reports.api.urls")),
    path("api/", include("apps.carbon.api.urls")),
    # Behind login unless FLEETWATT_API_DOCS_LOGIN=0; the docs' script is served apart (no inline script: the CSP).
    path("api/schema/", ApiSchemaView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="schema"), name="api-docs"),
    # Redoc loaded its logo from a CDN on every view (no CDN, and the CSP refuses it): its old links go to the docs.
    path("api/redoc/", RedirectView.as_view(pattern_name="api-docs"), name="api-redoc"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("reports/", include("apps.reports.urls")),
    path("", include("apps.dashboard.urls")),
]
