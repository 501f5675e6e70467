from django.urls import path

from . import views

app_name = "dashboard"
urlpatterns = [
    path("", views.fleet, name="fleet"),
    path("teams/<int:team_id>/", views.team, name="team"),
]
