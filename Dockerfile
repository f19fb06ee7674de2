# Multi-stage build of a static, non-root image holding both binaries,
# stamped with their version (from git in the build context, or --build-arg):
#   docker build -t firehose .
#   docker build --build-arg VERSION=v1.2.3 -t firehose:v1.2.3 .
#   docker run -p 1883:1883 -p 8083:8083 firehose        # no config: the defaults
#   docker run -p 1883:1883 -p 8883:8883 -p 8083:8083 -p 8080:8080 \
#     -v $PWD/config.yaml:/etc/firehose/config.yaml:ro -e FIREHOSE_CONFIG=/etc/firehose/config.yaml firehose
#   docker run --entrypoint /firehose/broker -p 1883:1883 firehose   # the broker alone
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION and REVISION override what scripts/version.sh reads from git.
ARG VERSION=""
RUN VERSION="$VERSION" scripts/build.sh /out \
 && mv /out/firehose /out/bridge && mv /out/firehose-broker /out/broker \
 && /out/bridge version \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=""
ARG REVISION=""
LABEL org.opencontainers.image.title="firehose" \
      org.opencontainers.image.description="One live MQTT bus for Chef, Ansible, ConfigDB, Gerrit, Launchpad and CI events" \
      org.opencontainers.image.source="https://github.com/opsfirehose/firehose" \
      org.opencontainers.image.url="https://github.com/opsfirehose/firehose" \
      org.opencontainers.image.documentation="https://github.com/opsfirehose/firehose#readme" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/bridge /out/broker /firehose/
COPY --from=build --chown=65532:65532 /out/data /var/lib/firehose
USER 65532:65532
# State lives in the volume: the default data_dir, "data", and any other
# relative state directory are taken from this working directory.
WORKDIR /var/lib/firehose
# No config is needed: give one with -e FIREHOSE_CONFIG=... (which the
# health check reads too) or --config. With none, MQTT listens on every
# interface but HTTP stays on the container's loopback; to publish 8080 the
# config must set http.address: 0.0.0.0:8080 (or FIREHOSE_HTTP_ADDRESS) with
# tokens, or allow_unauthenticated (see config.example.yaml). 8883 is MQTT
# over TLS once a listener with a tls section is configured there.
EXPOSE 1883 8883 8083 8080
VOLUME ["/var/lib/firehose"]
# distroless has no curl: the bridge asks itself (GET /healthz on the
# http.address the environment and FIREHOSE_CONFIG give).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/firehose/bridge", "health", "--timeout", "4s"]
ENTRYPOINT ["/firehose/bridge"]
