from rest_framework.routers import DefaultRouter

from .views import ClusterViewSet, GpuViewSet, JobGroupViewSet, TeamViewSet

router = DefaultRouter()
router.register("gpus", GpuViewSet, basename="gpu")
router.register("teams", TeamViewSet, basename="team")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("job-groups", JobGroupViewSet, basename="job-group")
urlpatterns = router.urls
