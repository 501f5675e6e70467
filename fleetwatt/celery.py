"""Celery application: configured from Django settings under the CELERY_ namespace."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleetwatt.settings")

app = Celery("fleetwatt")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
