# Pharos in a container: `docker build -t pharos .` then see compose.yaml.
# With the Docker socket mounted read-only it routes to every container labelled
# pharos.enable=true (README "Docker"); /etc/pharos holds the config, /var/lib/pharos
# the state file (usage, prefix index and stats survive a restart).

# Build stage: a C compiler so setup.py compiles the policy with mypyc and the chat chain's
# C links; without one pip silently installs the pure-Python build (pick p50 ~45 instead of
# ~8 us, ~+300 us before the first byte of a 32 KiB chat). Python's headers come from
# python3-dev only when the base lacks them (Debian's python3 ships none; the official
# image's are under /usr/local/include).
FROM python:3.11-slim AS build
RUN python -c "import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
        || headers=python3-dev; \
    apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        gcc libc6-dev $headers \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/pharos
COPY pyproject.toml setup.py README.md /src/
COPY src /src/src
# The build fails here rather than ship an image that runs the pure-Python fallback.
RUN /opt/pharos/bin/pip install --no-cache-dir /src && rm -rf /src \
    && cd / && /opt/pharos/bin/python -c "import pharos.policy.cost as cost, pharos.prefix.chain as chain, pharos.prefix.links as links; from pharos.policy._load import implementation; built = (implementation(cost), chain.IMPLEMENTATION, links.IMPLEMENTATION); print('pharos build:', *built); assert built == ('mypyc', 'c', 'c'), built"

# Final stage: the same base with the built venv, no compiler.
FROM python:3.11-slim
COPY --from=build /opt/pharos /opt/pharos

# Root in the container only to read the socket: run as `pharos`, and give it the socket's
# group with `group_add` (compose.yaml) instead.
RUN useradd --system --uid 10001 --home-dir /var/lib/pharos --shell /usr/sbin/nologin pharos \
    && mkdir -p /etc/pharos /var/lib/pharos && chown pharos /var/lib/pharos
COPY deploy/docker/pharos.yaml /etc/pharos/pharos.yaml
USER pharos
VOLUME ["/etc/pharos", "/var/lib/pharos"]
EXPOSE 8090
ENV PATH=/opt/pharos/bin:$PATH PYTHONUNBUFFERED=1

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request as u; sys.exit(0 if u.urlopen('http://127.0.0.1:8090/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["pharos"]
CMD ["serve", "--config", "/etc/pharos/pharos.yaml"]
