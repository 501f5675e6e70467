from django.urls import path
from rest_framework.routers import DefaultRouter

from .focus import FocusExportView
from .views import ClusterRollupViewSet, JobGroupRollupViewSet, TeamRollupViewSet

# Included before apps.fleet.api's router: `teams/compare/` must not be read as the team with id "compare".
router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("teams", TeamRollupViewSet, basename="team")
router.register("clusters", ClusterRollupViewSet, basename="cluster")
router.register("job-groups", JobGroupRollupViewSet, basename="job-group")
urlpatterns = [*router.urls, path("focus/", FocusExportView.as_view(), name="focus-list")]
