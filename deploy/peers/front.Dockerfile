# The round-robin front of compose.yaml: Debian's HAProxy (2.6 in bookworm) on the same
# Debian image Pharos's Dockerfile starts from, so the stack needs no other registry image.
FROM python:3.11-slim
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/*
COPY haproxy.cfg /etc/haproxy/haproxy.cfg
EXPOSE 8090
CMD ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
