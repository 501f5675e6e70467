FROM python:3.11-slim
# The app runs as a user of its own, uid/gid 10001 (numeric below, so that Kubernetes's runAsNonRoot can
# check it; deploy/k8s runs it so), and writes nothing but /tmp at run time: the root filesystem may be
# read-only.
RUN groupadd --system --gid 10001 fleetwatt \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin fleetwatt
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
ENV DJANGO_SETTINGS_MODULE=fleetwatt.settings PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Static files are collected into the image (whitenoise serves them). var/ stays the app user's, for
# docker-compose's `collectstatic` at start. The key is a placeholder for this step only.
RUN DJANGO_DEBUG=0 DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && chown -R 10001:10001 var
USER 10001:10001
EXPOSE 8000
