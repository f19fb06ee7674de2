# Multi-stage build of a static, non-root image holding both binaries.
#   docker build -t firehose .
#   docker run -p 1883:1883 -p 8083:8083 firehose        # no config: the defaults
#   docker run -p 1883:1883 -p 8083:8083 -p 8080:8080 \
#     -v $PWD/config.yaml:/etc/firehose/config.yaml:ro firehose --config /etc/firehose/config.yaml
#   docker run --entrypoint /firehose/broker -p 1883:1883 firehose   # the broker alone
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/bridge ./cmd/bridge \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/broker ./cmd/broker \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bridge /out/broker /firehose/
COPY --from=build --chown=65532:65532 /out/data /var/lib/firehose
USER 65532:65532
# State lives in the volume: the default data_dir, "data", and any other
# relative state directory are taken from this working directory.
WORKDIR /var/lib/firehose
# No config is needed (no FIREHOSE_CONFIG here, so a missing file is never
# guessed at): pass --config for one. With none, MQTT listens on every
# interface but HTTP stays on the container's loopback; to publish 8080 the
# config must set http.address: 0.0.0.0:8080 with tokens, or
# allow_unauthenticated (see config.example.yaml).
EXPOSE 1883 8083 8080
VOLUME ["/var/lib/firehose"]
ENTRYPOINT ["/firehose/bridge"]
