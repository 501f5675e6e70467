from rest_framework.routers import SimpleRouter

from .views import WhenToRunViewSet

router = SimpleRouter(trailing_slash=True)
router.register("when-to-run", WhenToRunViewSet, basename="when-to-run")
urlpatterns = router.urls
