# Multi-stage build of a static, non-root image holding both binaries.
#   docker build -t firehose .
#   docker run -p 1883:1883 -p 8083:8083 -p 8080:8080 -v $PWD/config.yaml:/etc/firehose/config.yaml firehose
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
# Inside a container the intake must listen beyond loopback: the config
# decides how (tokens, or allow_unauthenticated) — see config.example.yaml.
ENV FIREHOSE_CONFIG=/etc/firehose/config.yaml
EXPOSE 1883 8083 8080
VOLUME ["/var/lib/firehose"]
ENTRYPOINT ["/firehose/bridge"]
