"""gunicorn settings of the web service (docker-compose, `make bench`), each overridable from the environment."""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# Requests are short and CPU-bound (Python, then Postgres on the same cores): a process per core, each
# taking a connection only when it has a free thread, keeps the p95 close to the median. Threads only
# contend for the GIL, and a worker that queues connections it cannot serve yet makes the slow tail.
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count()))
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
# gthread even with one thread: its main loop keeps the heartbeat going while a long streamed CSV export
# is served, where a sync worker would be killed after `timeout`.
worker_class = "gthread"
worker_connections = threads
keepalive = 0  # the reverse proxy in front keeps the clients' connections
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
# No control socket (gunicorn 25+, for `gunicornc`): nothing here uses it, and its default place, $HOME/.gunicorn,
# is /app on the image's read-only root.
control_socket_disable = True


def child_exit(server: object, worker: object) -> None:
    """With PROMETHEUS_MULTIPROC_DIR set (django-prometheus's series merged over the workers at /metrics),
    a worker that exits leaves its gauges out of the next scrape."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
