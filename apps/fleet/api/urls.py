from rest_framework.routers import DefaultRouter

from .views import ClusterViewSet, GpuViewSet, TeamViewSet

router = DefaultRouter()
router.register("gpus", GpuViewSet, basename="gpu")
router.register("teams", TeamViewSet, basename="team")
router.register("clusters", ClusterViewSet, basename="cluster")
urlpatterns = router.urls
