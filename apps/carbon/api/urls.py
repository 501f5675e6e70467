from rest_framework.routers import SimpleRouter

from .frontier_views import FrontierViewSet, JobGroupFrontierViewSet
from .views import WhenToRunViewSet

router = SimpleRouter(trailing_slash=True)
router.register("when-to-run", WhenToRunViewSet, basename="when-to-run")
router.register("frontier", FrontierViewSet, basename="frontier")
# Only `job-groups/{id}/frontier/`: the groups' list and detail are apps.fleet.api's, their rollups apps.rollups.api's.
router.register("job-groups", JobGroupFrontierViewSet, basename="job-group")
urlpatterns = router.urls
