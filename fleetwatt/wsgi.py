"""WSGI entry point (gunicorn fleetwatt.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleetwatt.settings")
application = get_wsgi_application()
