# ontime in a container: a static binary (no cgo; SQLite is pure Go) on a
# distroless base that has CA certificates (https webhooks) and time zone
# data (schedules' time_zone), running as the non-root user 65532.
#
#   docker build -t ontime .
#   docker run -p 7070:7070 -v ontime-data:/var/lib/ontime \
#     -e ONTIME_LISTEN=0.0.0.0:7070 ontime serve --config /etc/ontime/ontime.yaml
#
# A listen address other than loopback needs API tokens (auth.tokens) in the
# config; see README "Security".

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ontime ./cmd/ontime \
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
