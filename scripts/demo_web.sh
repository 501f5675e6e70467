#!/usr/bin/env bash
# The demo's web server, in the foreground: scripts/demo_web.sh PORT. gunicorn as deployed (gunicorn.conf.py:
# a process per core, one thread each, so at most that many database connections), on 127.0.0.1 only.
# (runserver kept a connection per request thread: 20 clients took a shared Postgres's 100.)
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/gunicorn fleetwatt.wsgi -c gunicorn.conf.py --bind "127.0.0.1:$1"
