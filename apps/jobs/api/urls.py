from rest_framework.routers import DefaultRouter

from .views import JobViewSet
from .work_views import WorkViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("work", WorkViewSet, basename="work")
urlpatterns = router.urls
