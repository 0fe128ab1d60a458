#!/usr/bin/env bash
# Runs a command (the Go test suite) with a PostgreSQL of its own: a real
# server from the machine's PostgreSQL binaries, initialised in a temporary
# directory, on a free loopback port, stopped and removed when the command
# ends. The suite's tests reach it through ONTIME_TEST_PG (internal/testdb).
#
# Why not the shared server on 5432: the suite runs two packages at once,
# each with parallel tests that start clusters of nodes, and at its peak it
# holds more connections than the shared server's max_connections (100),
# which other work on the machine also uses; a test then fails with
# "53300 too many clients" wherever it happens to connect. This server has
# the shared one's settings (autovacuum off, fsync on) and room for 400.
#
# ONTIME_TEST_PG already set: the command runs against that server instead.
set -euo pipefail

if [[ -n "${ONTIME_TEST_PG:-}" ]]; then
  exec "$@"
fi

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [[ -z "$bin" ]]; then
  echo "with-test-postgres: PostgreSQL's binaries are required under /usr/lib/postgresql/*/bin (apt-get install postgresql)" >&2
  exit 1
fi

root=$(mktemp -d /tmp/ontime-test-pg.XXXXXX)
chmod 755 "$root"
as=()
if [[ $(id -u) == 0 ]]; then
  # postgres refuses to run as root.
  chown postgres: "$root"
  as=(runuser -u postgres --)
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

stop() {
  "${as[@]}" "$bin/pg_ctl" -D "$root/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$root"
}
trap stop EXIT

"${as[@]}" "$bin/initdb" -D "$root/data" -U postgres --auth=trust -E UTF8 --no-sync >"$root/initdb.log" 2>&1 ||
  { cat "$root/initdb.log" >&2; exit 1; }
"${as[@]}" "$bin/pg_ctl" -D "$root/data" -l "$root/log" -w -t 60 \
  -o "-p $port -c listen_addresses=127.0.0.1 -k $root -c max_connections=400 -c autovacuum=off -c shared_buffers=128MB" \
  start >/dev/null || { cat "$root/log" >&2; exit 1; }

echo "with-test-postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') for the tests on 127.0.0.1:$port (max_connections 400)"
export ONTIME_TEST_PG="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
# Not exec: the trap stops the server when the command ends.
"$@"
