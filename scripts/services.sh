#!/usr/bin/env bash
# Starts the local services the test suite talks to, when they are down,
# and installs chromium for the console's browser tests when it is missing.
# Idempotent: a running service is left alone. Used by `make services`.
set -u
up() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
wait_port() { for _ in $(seq 1 60); do up "$1" && return 0; sleep 1; done; echo "services: $2 did not come up on port $1" >&2; return 1; }
rc=0
# promtool (Debian's prometheus package) checks /metrics and the shipped
# alert rules (e2e/metrics_cluster_test.go, deploy/deploy_test.go): those
# tests fail without it, so a fresh machine gets it here.
if ! command -v promtool >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) || { echo "services: could not install promtool (apt-get install prometheus)" >&2; rc=1; }
fi
# The TypeScript and Python clients' tests (make test-clients) need node,
# npm and python3; the machine image has them, a bare one gets Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null) || { echo "services: could not install node and npm (apt-get install nodejs npm)" >&2; rc=1; }
fi
if ! command -v python3 >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null) || { echo "services: could not install python3" >&2; rc=1; }
fi
# The docs' runnable blocks (e2e TestDocsRun) use the sqlite3, mysql and
# psql command-line clients (the servers' packages bring the last two).
if ! command -v sqlite3 >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sqlite3 >/dev/null) || { echo "services: could not install sqlite3" >&2; rc=1; }
fi
# The data-centre loss test (e2e/chaos_zones_test.go) runs private
# PostgreSQL servers (initdb, pg_ctl, pg_basebackup under
# /usr/lib/postgresql/*/bin) in network namespaces (iproute2's ip netns),
# as the postgres user (util-linux's setpriv); it fails without them.
if ! ls /usr/lib/postgresql/*/bin/pg_basebackup >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null) || { echo "services: could not install PostgreSQL's server (apt-get install postgresql)" >&2; rc=1; }
fi
if ! command -v ip >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 util-linux >/dev/null) || { echo "services: could not install iproute2 (apt-get install iproute2)" >&2; rc=1; }
fi
if ! up 5432; then pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start; wait_port 5432 postgresql || rc=1; fi
if ! up 3306; then start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd; wait_port 3306 mariadb || rc=1; fi
if ! up 6379; then redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log; wait_port 6379 redis || rc=1; fi
if ! up 5672; then rabbitmq-server -detached; wait_port 5672 rabbitmq || rc=1; fi
if ! up 4222; then start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log; wait_port 4222 nats || rc=1; fi
if ! up 1883; then mosquitto -d -c /etc/mosquitto/mosquitto.conf; wait_port 1883 mosquitto || rc=1; fi
# The suite's parallel tests (several nodes per test, each with its pools)
# open more connections than MariaDB's default 151: raise the limit at
# runtime, without a restart, when it is lower.
if up 3306; then mysql -uroot -h127.0.0.1 -e 'SET GLOBAL max_connections = GREATEST(@@GLOBAL.max_connections, 600)' || rc=1; fi
# The console's browser tests (e2e/console_browser_test.go) drive Debian's
# chromium; they fail without it, so install it on a fresh machine.
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null \
    || { echo "services: could not install chromium (apt-get install -y chromium)" >&2; rc=1; }
fi
# ZooKeeper (Debian's zookeeper package, run by java): the ZooKeeper
# coordinator's tests start a private standalone server of their own
# (internal/testdb/zookeeper.go); they fail without it.
if [ ! -f /usr/share/java/zookeeper.jar ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper >/dev/null) || { echo "services: could not install zookeeper (apt-get install zookeeper)" >&2; rc=1; }
fi
# The Java client's tests (make java-test): javac/java 17 and Debian's
# JUnit 5 console launcher (CI has Debian's packages, not Maven Central).
if ! command -v javac >/dev/null 2>&1 || [ ! -f /usr/share/java/junit-platform-console-standalone.jar ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless junit5 >/dev/null) \
    || { echo "services: could not install the JDK and JUnit 5 (apt-get install openjdk-17-jdk-headless junit5)" >&2; rc=1; }
fi
exit $rc
