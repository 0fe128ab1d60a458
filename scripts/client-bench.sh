#!/usr/bin/env bash
# Submit rates of the clients against one `ontime serve` (SQLite, a temp
# directory): the Go client (bench/cmd/clientsubmit) and the Java client
# (clients/java, SubmitBench), sequential and 16 threads, in alternating
# rounds on the same node, then each client's best rate and its ratio to
# the Go client's. `make java-bench` runs it.
#   ROUNDS (2), SECONDS (5 per measurement), THREADS (16)
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA_OPTS=${JAVA_OPTS:-}
ROUNDS=${ROUNDS:-2} SECONDS_EACH=${SECONDS:-5} THREADS=${THREADS:-16}
work=$(mktemp -d)
serve_pid=
cleanup() { [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/ontime" ./cmd/ontime
(cd bench && go build -o "$work/clientsubmit" ./cmd/clientsubmit)
mkdir -p "$work/java/main" "$work/java/test"
javac --release 17 -d "$work/java/main" $(find clients/java/src/main -name '*.java')
javac --release 17 -d "$work/java/test" -cp "$work/java/main:/usr/share/java/junit-jupiter-api.jar" clients/java/src/test/java/com/ontimehq/ontime/SubmitBench.java
printf 'listen: 127.0.0.1:0\ndata_dir: %s\nlog_level: error\n' "$work/data" > "$work/ontime.yaml"
"$work/ontime" serve --config "$work/ontime.yaml" > "$work/serve.out" 2> "$work/serve.log" &
serve_pid=$!
for _ in $(seq 1 100); do grep -q 'listening on' "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^ontime listening on //p' "$work/serve.out")
[ -n "$url" ] || { echo "client-bench: ontime serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
echo "node $url; $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"
for r in $(seq 1 "$ROUNDS"); do
  "$work/clientsubmit" -server "$url" -seconds "$SECONDS_EACH" -threads "$THREADS" | tee -a "$work/results"
  java $JAVA_OPTS -cp "$work/java/main:$work/java/test" com.ontimehq.ontime.SubmitBench "$url" "$SECONDS_EACH" "$THREADS" | tee -a "$work/results"
done
echo "load after: $(uptime | sed 's/.*load average: //')"
awk '
  /^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
              k = f["client"] " " f["mode"]; if (f["rate"] > best[k]) best[k] = f["rate"]; clients[f["client"]] = 1 }
  END {
    printf "%-8s %-11s %12s %10s\n", "client", "mode", "submits/s", "vs Go"
    n = split("go java", order, " ")
    for (i = 1; i <= n; i++) { c = order[i]; if (!(c in clients)) continue
      split("sequential concurrent", modes, " ")
      for (j = 1; j <= 2; j++) { m = modes[j]; g = best["go " m]
        printf "%-8s %-11s %12.0f %9.2fx\n", c, m, best[c " " m], (g > 0 ? best[c " " m] / g : 0) } }
  }' "$work/results"
