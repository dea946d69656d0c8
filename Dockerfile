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
# `docker run --network host IMAGE` gives the standalone server: `evalsi serve` listens on loopback only (there
# is no authentication yet), so with the default bridge network it is unreachable from outside the container.
# compose.yaml runs each service on its own instead.
CMD ["evalsi", "serve", "--state-dir", "/data/serve"]
