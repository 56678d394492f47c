# halfmq broker image: the broker, its RocketMQ 5 front end and its CLI (no Spark, no SDK).
#   podman build --format docker --build-arg BASE_IMAGE="$HALFMQ_BASE_IMAGE" -t halfmq .   (see scripts/container-base.sh;
#   --format docker keeps the HEALTHCHECK, which the OCI format drops)
#   podman run -d -v halfmq-data:/data -p 10911:10911 -p 8080:8080 -p 8081:8081 -p 9092:9092 \
#     -e HALFMQ_TOPICS=orders:4 halfmq
#   a token from a mounted secret: -v ./token:/run/secrets/halfmq-token:ro -e HALFMQ_AUTH_TOKEN_FILE=/run/secrets/halfmq-token
#   TLS from mounted files: -v ./tls:/run/secrets/halfmq-tls:ro -e HALFMQ_TLS_CERT=/run/secrets/halfmq-tls/cert.pem
#     -e HALFMQ_TLS_KEY=/run/secrets/halfmq-tls/key.pem (and HALFMQ_TLS_CLIENT_CA for mutual TLS)
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY broker ./broker
COPY halfmq_proto ./halfmq_proto
COPY halfmq_cli ./halfmq_cli
# The rocketmq extra is the official RocketMQ 5 client, whose generated modules serve port 8081.
RUN pip install --no-cache-dir "./[rocketmq]" \
    && useradd --system --uid 10001 --no-create-home --home-dir /data halfmq \
    && mkdir -p /data \
    && chown halfmq /data

USER 10001
VOLUME ["/data"]
# Inside its own network namespace the broker listens on every interface.
ENV HALFMQ_HOST=0.0.0.0 \
    HALFMQ_DATA_DIR=/data \
    HALFMQ_GRPC_PORT=10911 \
    HALFMQ_HTTP_PORT=8080 \
    HALFMQ_ROCKETMQ_PORT=8081 \
    HALFMQ_KAFKA_PORT=9092 \
    HALFMQ_NAMESRV_PORT=9876 \
    HALFMQ_REMOTING_PORT=10921
EXPOSE 10911 8080 8081 9092 9876 10921
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["python", "-m", "broker.healthcheck"]
ENTRYPOINT ["halfmq-broker"]
