# ontime in a container: a static binary (no cgo; SQLite is pure Go) on a
# distroless base that has CA certificates (https webhooks) and time zone
# data (schedules' time_zone), running as the non-root user 65532.
#
#   docker build -t ontime .      (make image: stamped with git describe's version)
#   docker build --build-arg VERSION=v1.2.0 --build-arg COMMIT=$(git rev-parse HEAD) -t ontime:v1.2.0 .
#   docker run -p 7070:7070 -v ontime-data:/var/lib/ontime \
#     -e ONTIME_LISTEN=0.0.0.0:7070 ontime serve --config /etc/ontime/ontime.yaml
#
# A listen address other than loopback needs API tokens (auth.tokens) in the
# config; see docs/security.md.

FROM golang:1.26 AS build
# What `ontime version` and ontime_build_info say: .git is not in the build
# context, so the version and commit come as build arguments (make image
# passes git describe's). Left empty, the binary says "(devel)".
ARG VERSION=
ARG COMMIT=
ARG COMMIT_DATE=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w \
      -X 'github.com/ontimehq/ontime/internal/buildinfo.version=${VERSION}' \
      -X 'github.com/ontimehq/ontime/internal/buildinfo.commit=${COMMIT}' \
      -X 'github.com/ontimehq/ontime/internal/buildinfo.date=${COMMIT_DATE}'" \
    -o /out/ontime ./cmd/ontime \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ontime /usr/local/bin/ontime
COPY --from=build --chown=65532:65532 /out/data /var/lib/ontime
ENV ONTIME_DATA_DIR=/var/lib/ontime
WORKDIR /var/lib/ontime
VOLUME /var/lib/ontime
USER 65532:65532
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/ontime"]
CMD ["serve"]
