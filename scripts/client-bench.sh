#!/usr/bin/env bash
# Submit rates of the clients against one `ontime serve` (SQLite, a temp
# directory): the Go client (bench/cmd/clientsubmit) and the Java client
# (clients/java, SubmitBench), sequential and 16 threads, in alternating
# rounds on the same node, then each client's median rate and its ratio to
# the Go client's. `make java-bench` runs it.
#   ROUNDS (3), BENCH_SECONDS (5 per measurement; not SECONDS, which is
#   bash's clock of the shell), THREADS (16)
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA_OPTS=${JAVA_OPTS:-}
ROUNDS=${ROUNDS:-3} SECONDS_EACH=${BENCH_SECONDS:-5} THREADS=${THREADS:-16}
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
# Per client and mode: the median of the rounds (the machine's load moves
# single rounds by half) and the range, and the median's ratio to Go's.
awk '
  /^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
              k = f["client"] " " f["mode"]; n[k]++; r[k, n[k]] = f["rate"] + 0; clients[f["client"]] = 1 }
  function median(k,   i, j, t, a) {
    for (i = 1; i <= n[k]; i++) a[i] = r[k, i]
    for (i = 2; i <= n[k]; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    lo[k] = a[1]; hi[k] = a[n[k]]
    return n[k] % 2 ? a[(n[k]+1)/2] : (a[n[k]/2] + a[n[k]/2+1]) / 2
  }
  END {
    printf "%-6s %-11s %10s %19s %7s\n", "client", "mode", "median/s", "range/s", "vs Go"
    split("go java", order, " "); split("sequential concurrent", modes, " ")
    for (i = 1; i <= 2; i++) { c = order[i]; if (!(c in clients)) continue
      for (j = 1; j <= 2; j++) { m = modes[j]; g = median("go " m); v = median(c " " m)
        printf "%-6s %-11s %10.0f %9.0f–%-9.0f %6.2fx\n", c, m, v, lo[c " " m], hi[c " " m], (g > 0 ? v / g : 0) } }
  }' "$work/results"
