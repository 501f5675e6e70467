# Debian's bookworm with Debian's own Python (3.11), so that the base is an image anyone can make from
# Debian's archive (scripts/containers.sh builds it with debootstrap where no registry is reachable).
FROM debian:bookworm-slim
# One layer for the system packages, the virtual environment and the app's user: a storage driver that
# keeps every layer whole (vfs) pays for each. The app runs as uid/gid 10001 (numeric below, so that
# Kubernetes's runAsNonRoot can check it; deploy/k8s runs it so), and writes nothing but /tmp at run time:
# the root filesystem may be read-only.
#
# Where PyPI is reached through a TLS-inspecting proxy, give pip its CA bundle as the build secret `pip-ca`
# (`--secret id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt`): mounted for this step only, never stored.
RUN --mount=type=bind,source=requirements.txt,target=/tmp/requirements.txt \
    --mount=type=secret,id=pip-ca \
    apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check $(test -s /run/secrets/pip-ca && echo --cert /run/secrets/pip-ca) \
        -r /tmp/requirements.txt \
    && find /opt/venv -name __pycache__ -prune -exec rm -rf {} + \
    && groupadd --system --gid 10001 fleetwatt \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin fleetwatt
ENV PATH=/opt/venv/bin:$PATH DJANGO_SETTINGS_MODULE=fleetwatt.settings PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY . .
# Static files are collected into the image (whitenoise serves them). The key is a placeholder for this
# step only.
RUN DJANGO_DEBUG=0 DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput
USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "fleetwatt.wsgi", "-c", "gunicorn.conf.py"]
