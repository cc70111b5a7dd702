# syntax=docker/dockerfile:1
#
# Floodgate's image: one static binary on an empty base, run as a non-root
# user, with the built-in example policy unless --config names a mounted one.
#
#   docker build -t floodgate \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run --rm -p 8080:8080 -p 8081:8081 floodgate
#   docker run --rm floodgate version
#
# Ports: 8080 HTTP (/v1/allow, Envoy's /json, /healthz, /readyz, /metrics,
# /admin with --admin-token), 8081 gRPC (envoy.service.ratelimit.v3 and
# grpc.health.v1). Memberlist (--cluster-bind) uses the port you give it.
# See docs/deploy.md.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM docker.io/library/golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The build context leaves out .git, so the go command cannot stamp the
# version and commit: a release passes them here (floodgate version).
ARG VERSION=""
ARG COMMIT=""
WORKDIR /src
# The service's module and the modules it replaces with local directories,
# so that the download layer is cached until a go.mod or go.sum changes.
COPY go.mod go.sum ./
COPY cmd/go.mod cmd/go.sum cmd/
COPY cluster/go.mod cluster/go.sum cluster/
COPY internal/faults/go.mod internal/faults/go.sum internal/faults/
RUN --mount=type=cache,target=/go/pkg/mod cd cmd && GOWORK=off go mod download
COPY . .
# CGO off: a static binary for the empty base. -trimpath: no build machine
# paths in it. GOWORK=off: the cmd module on its own, as CI builds it.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd cmd && GOWORK=off CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/floodgate-io/floodgate/cmd/internal/cli.Version=${VERSION} -X github.com/floodgate-io/floodgate/cmd/internal/cli.Commit=${COMMIT}" \
      -o /out/floodgate ./floodgate

FROM scratch
ARG VERSION=""
LABEL org.opencontainers.image.title="floodgate" \
      org.opencontainers.image.description="Distributed rate limiter: Envoy rate limit service, HTTP API, proxy" \
      org.opencontainers.image.source="https://github.com/floodgate-io/floodgate" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
# Authorities for rediss:// and TLS peers that use the public roots.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/floodgate /floodgate
# nobody:nogroup in distroless's numbering; no /etc/passwd is needed.
USER 65532:65532
# Listeners bind 127.0.0.1 by default, unreachable from outside a
# container: the image binds every interface. Environment variables, not
# CMD flags, because flags win over FLOODGATE_ variables and would hide a
# FLOODGATE_HTTP given to docker run -e.
ENV FLOODGATE_HTTP=0.0.0.0:8080 \
    FLOODGATE_GRPC=0.0.0.0:8081
EXPOSE 8080 8081
ENTRYPOINT ["/floodgate"]
CMD ["serve"]
