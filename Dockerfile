# One image for every Evals.si service (api, scheduler, worker) and the CLI.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY libs ./libs
COPY services ./services
COPY proto ./proto
RUN pip install . && useradd --system --uid 10001 evalsi && mkdir -p /data && chown evalsi /data
USER evalsi
WORKDIR /data
# `docker run IMAGE` gives the standalone server; compose.yaml runs each service on its own.
CMD ["evalsi", "serve", "--state-dir", "/data/serve"]
