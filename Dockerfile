# One image for every Evals.si service (api, ingest, policy, scheduler, worker) and the CLI.
FROM python:3.11-slim AS server

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# bubblewrap: evalsi-sandboxd's namespaced rung; busybox-static: sh and the core utilities of the runtime image, the
# default root of sandboxes (docs/sandbox.md).
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap busybox-static \
    && rm -rf /var/lib/apt/lists/*
# The extras the image runs with: server (the OTLP exporter `evalsi-policy --otlp-events` sends with), fast (uvloop).
ARG EXTRAS=server,fast
# Dependencies first, read from pyproject.toml alone: a change to the source rebuilds only the layers below this.
COPY pyproject.toml ./
RUN python -c "import os, tomllib; project = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extras = project['optional-dependencies']; \
print('\n'.join(project['dependencies'] + [r for name in os.environ['EXTRAS'].split(',') for r in extras[name]]))" \
    > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt
COPY README.md ./
COPY libs ./libs
COPY services ./services
COPY proto ./proto
RUN pip install --no-deps . && useradd --system --uid 10001 evalsi && mkdir -p /data && chown evalsi /data \
    && install -d -o evalsi -m 0700 /run/evalsi/sandboxd
USER evalsi
WORKDIR /data
# `docker run --network host IMAGE` gives the standalone server: `evalsi serve` listens on loopback only (there
# is no authentication yet), so with the default bridge network it is unreachable from outside the container.
# compose.yaml runs each service on its own instead.
CMD ["evalsi", "serve", "--state-dir", "/data/serve"]

# `docker build --target ci -t evalsi-ci .`: the same image running `evalsi ci run` for CI systems other than GitHub
# Actions (docs/ci.md): `docker run --rm -v "$PWD:/work" evalsi-ci --spec run.yaml`. An ENTRYPOINT clears the CMD
# inherited from the server stage, so arguments go straight to `evalsi ci run`.
FROM server AS ci
WORKDIR /work
ENTRYPOINT ["evalsi", "ci", "run"]

# The default target (a plain `docker build .`, compose.yaml): the server image above.
FROM server
