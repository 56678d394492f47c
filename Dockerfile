# halfmq broker image: the broker and its CLI only (no Spark, no SDK).
#   podman build --format docker --build-arg BASE_IMAGE="$HALFMQ_BASE_IMAGE" -t halfmq .   (see scripts/container-base.sh;
#   --format docker keeps the HEALTHCHECK, which the OCI format drops)
#   podman run -d -v halfmq-data:/data -p 10911:10911 -p 8080:8080 -e HALFMQ_TOPICS=orders:4 halfmq
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY broker ./broker
COPY halfmq_proto ./halfmq_proto
COPY halfmq_cli ./halfmq_cli
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --no-create-home --home-dir /data halfmq \
    && mkdir -p /data \
    && chown halfmq /data

USER 10001
VOLUME ["/data"]
# Inside its own network namespace the broker listens on every interface.
ENV HALFMQ_HOST=0.0.0.0 \
    HALFMQ_DATA_DIR=/data \
    HALFMQ_GRPC_PORT=10911 \
    HALFMQ_HTTP_PORT=8080
EXPOSE 10911 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ['HALFMQ_HTTP_PORT']}/healthz\", timeout=2)"]
ENTRYPOINT ["halfmq-broker"]
