from rest_framework.routers import DefaultRouter

from .views import GpuViewSet

router = DefaultRouter()
router.register("gpus", GpuViewSet, basename="gpu")
urlpatterns = router.urls
