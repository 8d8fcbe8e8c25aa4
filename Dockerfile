# mcs-syncer: a static binary on a distroless, non-root base.
# `make image` builds it where a Docker engine runs; `make build` compiles
# the same binary with the same flags (CGO_ENABLED=0, -trimpath, -s -w).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY pkg/reconciler/go.mod pkg/reconciler/go.sum pkg/reconciler/
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/mcs-syncer ./cmd/mcs-syncer

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/mcs-syncer /mcs-syncer
USER 65532:65532
ENTRYPOINT ["/mcs-syncer"]
