from django.urls import path

from . import views

app_name = "reports"
urlpatterns = [
    path("", views.archive, name="archive"),
    path("<int:report_id>/", views.report, name="report"),
    path("<int:report_id>/resolve/", views.resolve, name="resolve"),
    path("preview/", views.preview, name="preview"),
    path("send/", views.send_now, name="send"),
    path("teams/<int:team_id>/recipients/", views.recipients, name="recipients"),
    path("unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
]
