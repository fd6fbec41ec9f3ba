# Pharos in a container: `docker build -t pharos .` then see compose.yaml.
# With the Docker socket mounted read-only it routes to every container labelled
# pharos.enable=true (README "Docker"); /etc/pharos holds the config, /var/lib/pharos
# the state file (usage, prefix index and stats survive a restart).
FROM python:3.11-slim

RUN python -m venv /opt/pharos
COPY pyproject.toml README.md /src/
COPY src /src/src
RUN /opt/pharos/bin/pip install --no-cache-dir /src && rm -rf /src

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
