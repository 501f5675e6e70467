from rest_framework.routers import DefaultRouter

from .views import AuditLogViewSet, FlagViewSet, JobActionViewSet

router = DefaultRouter()
router.register("flags", FlagViewSet, basename="flag")
router.register("jobs", JobActionViewSet, basename="job-action")
router.register("audit-log", AuditLogViewSet, basename="audit-log")
urlpatterns = router.urls
