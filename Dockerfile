# Container image of sampled, the LLM sampling service.
#
#   docker build -t sampled .
#   docker run --rm -p 127.0.0.1:8080:8080 sampled  # offline provider, no key
#   docker run --rm -p 127.0.0.1:8080:8080 -e SAMPLING_PROVIDER=openai \
#     -e SAMPLING_API_KEY=sk-... -e SAMPLING_MODEL=gpt-4o-mini sampled
#
# Two stages: the Go toolchain builds two static binaries (the service and a
# tiny health probe), and the runtime stage is distroless/static: no shell,
# no package manager, running as the unprivileged user nonroot (uid 65532).
# internal/deploytest checks this file's `go build` lines (static, stripped,
# trimmed; the build context holds what they need) and runs the two
# packages as the image would; .ci/run builds the service with these flags.

# The build stage runs on the builder's own platform and cross-compiles to
# the target one (docker buildx build --platform linux/amd64,linux/arm64).
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src

# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

# Then the sources (.dockerignore keeps out .git, docs, tests, reference data).
COPY . .
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/sampled ./cmd/server
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/healthcheck ./cmd/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sampled /sampled
COPY --from=build /out/healthcheck /healthcheck
USER nonroot:nonroot
# sampled's own default is loopback, which a container's port mapping
# cannot reach: listen on every interface of the container, and publish the
# port on the host's loopback (-p 127.0.0.1:8080:8080) unless API keys are
# configured (README, Access).
ENV SAMPLED_ADDR=:8080
EXPOSE 8080
# /healthcheck GETs http://127.0.0.1:8080/healthz (or SAMPLED_ADDR's port).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/healthcheck"]
ENTRYPOINT ["/sampled"]
