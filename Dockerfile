# syntax=docker/dockerfile:1
# tickwork images. Targets (the deployment modes of docs/operations/deployment.md):
#   api       `tickwork serve` without the worker's system tools (WORKER_IS_ENABLED=false)
#   worker    `tickwork worker`: the dedicated worker, with the task handlers' system tools
#   console   `tickwork console`: the web console on its own, a client of the API at
#             TICKWORK_SERVER (split deployments)
#   embedded  `tickwork serve` with both loops (the default: the last target)
# All run as the unprivileged user `tickwork`; the SQLite database lives in the volume
# /var/lib/tickwork. The service's health check asks the gRPC health service.
# Stopping: SIGTERM; `tickwork serve` and `tickwork worker` exit within
# TICKWORK_SHUTDOWN_GRACE_SECONDS (default 25 s; docs/operations/maintenance.md, "Shutdown"):
# give the container at least that before SIGKILL (compose: stop_grace_period 30s;
# Kubernetes: terminationGracePeriodSeconds, 30 by default).

FROM python:3.11-slim-bookworm AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
STOPSIGNAL SIGTERM
RUN groupadd --system --gid 10001 tickwork \
 && useradd --system --uid 10001 --gid tickwork --home-dir /var/lib/tickwork \
      --shell /usr/sbin/nologin tickwork \
 && install -d -o tickwork -g tickwork -m 0750 /var/lib/tickwork
WORKDIR /opt/tickwork
COPY pyproject.toml README.md ./
COPY client ./client
COPY scheduler_svc ./scheduler_svc
COPY worker_svc ./worker_svc
RUN pip install . && rm -rf /opt/tickwork/build
# Relative module paths of `python` tasks resolve against the working directory.
WORKDIR /var/lib/tickwork
ENV DATABASE_URL=sqlite+aiosqlite:////var/lib/tickwork/tickwork.db \
    TICKWORK_LISTEN=0.0.0.0:50051 \
    TICKWORK_SERVER=127.0.0.1:50051

FROM base AS api
ENV SCHEDULER_IS_ENABLED=true \
    WORKER_IS_ENABLED=false
VOLUME ["/var/lib/tickwork"]
EXPOSE 50051 9464 8484
USER tickwork
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["tickwork", "health"]
CMD ["tickwork", "serve"]

FROM base AS console
ENV TICKWORK_CONSOLE_LISTEN=0.0.0.0:8484
EXPOSE 8484
USER tickwork
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8484/healthz', timeout=3)"]
CMD ["tickwork", "console"]

FROM base AS worker
# What `shell` tasks commonly need; add your own tools in an image built FROM this target.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash ca-certificates curl sqlite3 \
 && rm -rf /var/lib/apt/lists/*
USER tickwork
# The worker serves no port: its liveness is its stream to the service, which restarts
# `tickwork worker` on failure (compose `restart: unless-stopped`).
HEALTHCHECK NONE
CMD ["tickwork", "worker"]

FROM worker AS embedded
ENV SCHEDULER_IS_ENABLED=true \
    WORKER_IS_ENABLED=true
VOLUME ["/var/lib/tickwork"]
EXPOSE 50051 9464 8484
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["tickwork", "health"]
CMD ["tickwork", "serve"]
