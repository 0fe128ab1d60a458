"""Submit rate of this client against a node: WORKERS threads submitting
keyed tasks (due in an hour, so nothing is delivered meanwhile) for SECS
seconds. Prints one JSON line. Run by bench/clients (the Go driver that
puts the three clients side by side):

    python3 bench.py URL WORKERS SECS [coalesce|nocoalesce]
"""
import itertools
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from ontime import Client  # noqa: E402


def main() -> None:
    url, workers, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    co = not (len(sys.argv) > 4 and sys.argv[4] == "nocoalesce")
    c = Client(url, coalesce=co)
    run = f"py{os.getpid()}x{int(time.time() * 1000):x}"
    seq = itertools.count()

    def submit_one() -> None:
        n = next(seq)
        c.submit(topic="bench.clients", key=f"{run}-{n}", delay="1h", target="http://127.0.0.1:9/h", payload={"n": n})

    for _ in range(500):  # warm up: connections open
        submit_one()
    counts = [0] * workers
    cpu0 = time.process_time()
    start = time.perf_counter()
    until = start + secs

    def loop(i: int) -> None:
        while time.perf_counter() < until:
            submit_one()
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    done = sum(counts)
    # CPU time of this process per submit (user + system, µs): what the client costs, whatever the machine's load.
    print(json.dumps({"client": "python", "workers": workers, "tasks": done, "secs": elapsed, "rate": done / elapsed, "cpu_us": cpu * 1e6 / done}))
    c.close()


if __name__ == "__main__":
    main()
