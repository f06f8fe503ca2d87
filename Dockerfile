# One image for web, worker and beat (docker-compose.yml chooses the command).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=capeval.settings.production \
    CAPEVAL_VAR_DIR=/var/capeval \
    PYTHONPATH=/app/platform:/app
# Java for METEOR and pycocoevalcap's PTB tokenizer (the metric lab). Slim images lack the
# man folder the JRE's post-install step writes into.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update && apt-get install -y --no-install-recommends default-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY platform ./platform
COPY annotation ./annotation
COPY rubrics ./rubrics
COPY templates ./templates
COPY static ./static
COPY manage.py ./
# The sources run from /app (PYTHONPATH) with PYTHONDONTWRITEBYTECODE: compiled here once,
# or every web and worker process compiles them at start (about 1 s each; issue 27).
RUN pip install --no-cache-dir -c constraints.txt . \
 && python -m compileall -q platform annotation rubrics \
 && SECRET_KEY=collectstatic-only-$(python -c "print('x'*50)") ALLOWED_HOSTS=build \
    REDIS_URL=redis://build-never-connects/0 python manage.py collectstatic --no-input \
 && useradd --system --uid 10001 capeval && mkdir -p /var/capeval && chown capeval /var/capeval
USER capeval
EXPOSE 8000
# Scheme and forwarding headers are trusted by Django's settings only (CAPEVAL_TRUSTED_PROXIES).
CMD ["gunicorn", "capeval.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--chdir", "platform", "--forwarded-allow-ips="]
