from django.urls import path

from . import audit_views, team_views, token_views, views

app_name = "dashboard"
urlpatterns = [
    path("", views.fleet, name="fleet"),
    path("home/", views.home, name="home"),
    path("teams/mine/", views.my_team, name="my-team"),
    path("teams/<int:team_id>/", views.team, name="team"),
    path("teams/<int:team_id>/jobs/", team_views.team_jobs, name="team-jobs"),
    path("teams/<int:team_id>/jobs.csv", team_views.team_jobs_csv, name="team-jobs-csv"),
    path("jobs/", views.jobs, name="jobs"),
    path("jobs/<int:job_id>/", views.job, name="job"),
    path("jobs/<slug:scheduler>/<str:scheduler_job_id>/", views.job_by_scheduler_id, name="job-by-scheduler-id"),
    path("gpus/<int:gpu_id>/", views.gpu, name="gpu"),
    path("groups/", views.groups, name="groups"),
    path("status/", views.status, name="status"),
    path("audit/", audit_views.queue, name="audit"),
    path("audit/bulk/", audit_views.bulk, name="audit-bulk"),
    path("audit/<int:flag_id>/act/", audit_views.act, name="audit-act"),
    path("audit/jobs/<int:job_id>/act/", audit_views.act_on_job, name="audit-job-act"),
    path("tokens/", token_views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token-revoke"),
]
