"""The client against a live `ontime serve` (tests/node.py starts it).

    cd clients/python && python3 -m unittest discover -s tests -v
"""
from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from node import FaultyProxy, Node, Receiver, uniq, wait_for  # noqa: E402

from ontime import (  # noqa: E402
    Client,
    Coalesce,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NetworkError,
    NotFoundError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
    verify_signature,
)

NOWHERE = "http://127.0.0.1:9/h"
node: Node
rcv: Receiver
c: Client


def setUpModule() -> None:
    global node, rcv, c
    rcv = Receiver()
    node = Node(rcv)
    c = Client(node.url, token=node.admin_token)


def tearDownModule() -> None:
    c.close()
    node.stop()
    rcv.stop()


class TasksByID(unittest.TestCase):
    def test_submit_get_update_cancel(self) -> None:
        topic = uniq("py.id")
        r = c.submit({"topic": topic, "delay": "1h", "payload": {"order": 42, "items": [1, 2]}, "target": NOWHERE})
        self.assertTrue(r["created"])
        t = r
        self.assertEqual(t["topic"], topic)
        self.assertEqual(t["status"], "pending")
        self.assertEqual(t["payload"], {"order": 42, "items": [1, 2]})
        self.assertTrue(t.get("key", "").startswith("auto-"), "a keyless submit is given a key (retries find the task)")
        self.assertEqual(c.get(t["id"])["id"], t["id"])
        due = (datetime.now(timezone.utc) + timedelta(hours=2)).replace(microsecond=0)
        u = c.update(t["id"], {"due_at": due.isoformat().replace("+00:00", "Z"), "payload": "text", "max_attempts": 3})
        self.assertEqual(datetime.fromisoformat(u["due_at"].replace("Z", "+00:00")), due)
        self.assertEqual(u["payload"], "text")
        self.assertEqual(u["max_attempts"], 3)
        self.assertEqual(u.get("moved_by"), "update")
        self.assertEqual(c.cancel(t["id"])["status"], "cancelled")
        with self.assertRaises(ConflictError):
            c.update(t["id"], {"delay": "1m"})
        with self.assertRaises(ConflictError):
            c.requeue(t["id"])

    def test_keyword_arguments(self) -> None:
        t = c.submit(topic=uniq("py.kw"), key="k", delay="1h", payload={"a": 1}, target=NOWHERE)
        self.assertTrue(t["created"])
        self.assertEqual((t["key"], t["payload"]), ("k", {"a": 1}))
        with self.assertRaises(TypeError):
            c.submit({"topic": "t"}, key="k")

    def test_any_json_payload(self) -> None:
        topic = uniq("py.payload")
        for payload in (None, True, 3.5, "s", [1, "x"], {"a": {"b": [None]}}):
            t = c.submit({"topic": topic, "delay": "1h", "payload": payload, "target": NOWHERE})
            self.assertEqual(c.get(t["id"])["payload"], payload)

    def test_resubmit_of_a_key(self) -> None:
        topic = uniq("py.dup")
        a = c.submit({"topic": topic, "key": "k1", "delay": "1h", "target": NOWHERE})
        b = c.submit({"topic": topic, "key": "k1", "delay": "2h", "target": NOWHERE})
        self.assertTrue(a["created"])
        self.assertFalse(b["created"])
        self.assertEqual(a["id"], b["id"])
        r = c.submit({"topic": topic, "key": "k1", "delay": "3h", "target": NOWHERE, "if_exists": "replace"})
        self.assertFalse(r["created"])
        self.assertEqual(r.get("moved_by"), "update")


class TasksByKey(unittest.TestCase):
    def test_get_update_cancel_by_key(self) -> None:
        topic = uniq("py.key")
        key = "order/42 ä?&#"
        t = c.submit({"topic": topic, "key": key, "delay": "1h", "target": NOWHERE})
        self.assertEqual(t.get("key"), key)
        self.assertEqual(c.get_by_key(topic, key)["id"], t["id"])
        self.assertEqual(c.update_by_key(topic, key, {"payload": {"v": 2}})["payload"], {"v": 2})
        self.assertEqual([x["id"] for x in c.list(topic=topic, key=key)["tasks"]], [t["id"]])
        self.assertEqual(c.cancel_by_key(topic, key)["status"], "cancelled")
        with self.assertRaises(NotFoundError):
            c.get_by_key(topic, "no-such-key")


class Batch(unittest.TestCase):
    def test_a_bad_entry_fails_alone(self) -> None:
        topic = uniq("py.batch")
        res = c.submit_batch(
            [
                {"topic": topic, "delay": "1h", "payload": {"n": 1}, "target": NOWHERE},
                {"topic": "not a topic!", "delay": "1h", "target": NOWHERE},
                {"topic": topic, "delay": "soon", "target": NOWHERE},
                {"topic": topic, "key": "b4", "delay": "1h", "target": NOWHERE},
            ]
        )
        self.assertEqual(len(res), 4)
        self.assertTrue(res[0].created)
        self.assertEqual(res[0].task["payload"], {"n": 1})  # type: ignore[index]
        self.assertIsInstance(res[1].error, InvalidError)
        self.assertEqual(res[1].error.field, "topic")  # type: ignore[union-attr]
        self.assertEqual(res[1].error.status, 400)  # type: ignore[union-attr]
        self.assertIsInstance(res[2].error, InvalidError)
        self.assertEqual(res[2].error.field, "delay")  # type: ignore[union-attr]
        self.assertEqual(res[3].task["key"], "b4")  # type: ignore[index]
        self.assertEqual(len(c.list(topic=topic)["tasks"]), 2)

    def test_minimal(self) -> None:
        """IDs, statuses and each bad entry's error, in order; a node that
        ignores Prefer (the proxy drops it) gives the same."""
        topic = uniq("py.min")
        proxy = FaultyProxy(node.port)
        # A client whose headers carry a Prefer of their own: the call's replaces it.
        clients = [Client(proxy.url, token=node.admin_token), Client(proxy.url, token=node.admin_token, headers={"prefer": "return=representation"})]
        try:
            first: Dict[str, str] = {}
            for i, pc in enumerate(clients):
                for drop in (False, True):
                    what = f"client {i}, {'whole views' if drop else 'minimal'}"
                    proxy.drop_prefer = drop
                    refs = pc.submit_batch_minimal(
                        [
                            {"topic": topic, "key": f"m1.{i}", "delay": "1h", "target": NOWHERE},
                            {"topic": "not a topic!", "delay": "1h", "target": NOWHERE},
                            {"topic": topic, "delay": "1h", "payload": {"n": 2}, "target": NOWHERE},
                            {"topic": topic, "key": f"m1.{i}", "delay": "2h", "target": NOWHERE},
                        ]
                    )
                    self.assertEqual(proxy.seen[-1][1], "/v1/tasks:batch", what)
                    self.assertEqual(proxy.prefs[-1], ("return=minimal", None if drop else "return=minimal"), what)
                    self.assertEqual(len(refs), 4, what)
                    a, bad, b, again = (cast(Dict[str, Any], r) for r in refs)
                    for r in (a, b, again):
                        self.assertEqual(sorted(r), ["created", "id", "status"], what)
                    self.assertEqual(bad, {"error": bad["error"], "created": False}, what)
                    self.assertEqual((bad["error"]["code"], bad["error"]["field"]), ("invalid", "topic"), what)
                    self.assertRegex(a["id"], r"^[0-9A-Za-z]{26}$", what)
                    self.assertEqual((a["status"], b["status"]), ("pending", "pending"), what)
                    self.assertNotEqual(a["id"], b["id"], what)
                    # The second entry of the key finds the first's task.
                    self.assertEqual((again["id"], again["created"]), (a["id"], False), what)
                    # The keyless entry is a new task each time (its own auto key).
                    self.assertTrue(b["created"], what)
                    if not drop:
                        self.assertTrue(a["created"], what)
                        first[f"m1.{i}"] = a["id"]
                    else:  # the same batch again: the key's task is found
                        self.assertEqual((a["id"], a["created"]), (first[f"m1.{i}"], False), what)
                    # The IDs name the tasks sent, in order.
                    ta = c.get(a["id"])
                    self.assertEqual((ta.get("key"), ta["status"]), (f"m1.{i}", a["status"]), what)
                    tb = c.get(b["id"])
                    self.assertEqual((tb["topic"], tb["payload"]), (topic, {"n": 2}), what)
            # Each client's key once, and a keyless task per call.
            self.assertEqual(len(c.list(topic=topic)["tasks"]), len(clients) * 3)
            # Split as submit_batch splits.
            proxy.drop_prefer = False
            refs = clients[0].submit_batch_minimal([{"topic": topic, "key": f"big{i}", "delay": "1h", "target": NOWHERE} for i in range(1500)])
            self.assertEqual(len(refs), 1500)
            self.assertTrue(all(r.get("created") is True and r.get("status") == "pending" for r in refs))
            self.assertEqual(c.get(cast(Dict[str, Any], refs[1234])["id"]).get("key"), "big1234")
            sizes = [len(json.loads(b)["tasks"]) for m, p, b in proxy.seen[-2:]]
            self.assertEqual(sizes, [1000, 500])
            self.assertEqual([ap for _, ap in proxy.prefs[-2:]], ["return=minimal", "return=minimal"])
        finally:
            for pc in clients:
                pc.close()
            proxy.stop()

    def test_above_1000_the_helper_splits(self) -> None:
        topic = uniq("py.big")
        proxy = FaultyProxy(node.port)
        pc = Client(proxy.url, token=node.admin_token)
        try:
            res = pc.submit_batch([{"topic": topic, "key": f"k{i}", "delay": "1h", "target": NOWHERE} for i in range(2500)])
            self.assertEqual(len(res), 2500)
            self.assertTrue(all(r.created and r.task["key"] == f"k{i}" for i, r in enumerate(res)))  # type: ignore[index]
            sizes = [len(json.loads(b)["tasks"]) for m, p, b in proxy.seen if p == "/v1/tasks:batch"]
            self.assertEqual(sizes, [1000, 1000, 500])
        finally:
            pc.close()
            proxy.stop()


class List(unittest.TestCase):
    def test_pages(self) -> None:
        topic = uniq("py.page")
        ids = [c.submit({"topic": topic, "delay": "1h", "target": NOWHERE})["id"] for _ in range(7)]
        p1 = c.list(topic=topic, limit=3)
        self.assertEqual(len(p1["tasks"]), 3)
        self.assertTrue(p1.get("next_cursor"))
        p2 = c.list(topic=topic, limit=3, cursor=p1["next_cursor"])
        p3 = c.list(topic=topic, limit=3, cursor=p2["next_cursor"])
        self.assertEqual(len(p3["tasks"]), 1)
        self.assertIsNone(p3.get("next_cursor"))
        # Creation order; tasks made within one millisecond may be listed in any order among them.
        self.assertEqual(sorted(t["id"] for t in p1["tasks"] + p2["tasks"] + p3["tasks"]), sorted(ids))
        self.assertEqual(sorted(t["id"] for t in c.list_all(topic=topic, limit=2)), sorted(ids))
        self.assertEqual(c.list(topic=topic, status="done")["tasks"], [])
        with self.assertRaises(InvalidError):
            c.list(topic=topic, limit=5000)


class Topics(unittest.TestCase):
    def test_list_pause_resume_requeue(self) -> None:
        topic = uniq("py.topic")
        c.submit({"topic": topic, "delay": "1h", "target": NOWHERE})
        self.assertTrue(c.pause_topic(topic)["paused"])
        t = [x for x in c.topics()["topics"] if x["topic"] == topic]
        self.assertEqual(len(t), 1)
        self.assertTrue(t[0]["paused"])
        self.assertFalse(c.resume_topic(topic)["paused"])
        self.assertEqual(c.requeue_topic(topic), 0)


class Schedules(unittest.TestCase):
    def test_create_get_list_put_pause_resume_trigger_delete(self) -> None:
        name = uniq("py-sched")
        task = {"topic": "py.sched", "payload": {"report": True}, "target": NOWHERE}
        s = c.create_schedule({"name": name, "cron": "0 3 * * *", "task": task})  # type: ignore[typeddict-item]
        self.assertEqual(s["name"], name)
        with self.assertRaises(ConflictError):
            c.create_schedule({"name": name, "cron": "0 3 * * *", "task": task})  # type: ignore[typeddict-item]
        self.assertEqual(c.get_schedule(name)["cron"], "0 3 * * *")
        self.assertIn(name, [x["name"] for x in c.list_schedules()])
        sched, created = c.put_schedule(name, {"cron": "@every 1h", "task": task})  # type: ignore[typeddict-item]
        self.assertFalse(created)
        self.assertEqual(sched["cron"], "@every 1h")
        self.assertTrue(c.pause_schedule(name)["paused"])
        self.assertFalse(c.resume_schedule(name)["paused"])
        r = c.trigger_schedule(name)
        self.assertEqual(r["topic"], "py.sched")
        self.assertEqual(r["payload"], {"report": True})
        c.delete_schedule(name)
        with self.assertRaises(NotFoundError):
            c.get_schedule(name)
        with self.assertRaises(InvalidError) as cm:
            c.create_schedule({"name": uniq("bad"), "cron": "not cron", "task": {"topic": "t"}})
        self.assertEqual(cm.exception.field, "cron")


class JobsAndOperations(unittest.TestCase):
    def test_a_scan_job_runs_and_every_other_route(self) -> None:
        self.assertEqual([j["name"] for j in c.jobs()], ["bills"])
        self.assertEqual(c.job("bills")["name"], "bills")
        self.assertTrue(c.pause_job("bills")["paused"])
        self.assertFalse(c.resume_job("bills")["paused"])
        self.assertEqual(c.trigger_job("bills")["name"], "bills")
        # The run posts the bills to the receiver, signed, and marks them.
        path, headers, body = rcv.wait(lambda call: call[0] == "/bills")
        self.assertTrue(verify_signature(headers.get("ontime-signature"), node.bills_target, body, node.secret))
        self.assertEqual(json.loads(body)["job"], "bills")

        def settled() -> bool:
            db = sqlite3.connect(node.app_db)
            try:
                return db.execute("SELECT count(*) FROM bill WHERE status = 0").fetchone()[0] == 0
            finally:
                db.close()

        wait_for(settled, what="every bill marked status 1")
        wait_for(lambda: len(c.job_runs("bills", limit=5)) > 0, what="a run listed")
        with self.assertRaises(NotFoundError):
            c.job("nope")
        self.assertEqual(c.outboxes(), [])
        self.assertTrue(c.cluster()["node"])
        self.assertEqual(c.health()["status"], "ok")
        self.assertEqual(c.ready()["status"], "ready")
        self.assertIn("ontime_", c.metrics())
        self.assertEqual(c.openapi()["openapi"], "3.1.0")


class Errors(unittest.TestCase):
    def test_mapped_to_the_error_classes(self) -> None:
        with self.assertRaises(NotFoundError) as cm:
            c.get("01jdzzzzzzzzzzzzzzzzzzzzzz")
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))
        self.assertTrue(cm.exception.request_id)
        with self.assertRaises(InvalidError) as ci:
            c.submit({"topic": "", "target": NOWHERE})
        self.assertEqual(ci.exception.field, "topic")
        with self.assertRaises(TooLargeError):
            c.submit({"topic": "t", "delay": "1h", "payload": "x" * 1_100_000, "target": NOWHERE})
        with Client(node.url) as anon, self.assertRaises(UnauthorizedError):
            anon.list(topic="t")
        with Client(node.url, token=node.read_token) as reader:
            with self.assertRaises(ForbiddenError):
                reader.submit({"topic": "t", "target": NOWHERE})
            reader.list(topic="t")
        with Client("http://127.0.0.1:9", retries=1, retry_base=0.001) as down, self.assertRaises(NetworkError):
            down.health()
        with self.assertRaises(ValueError):
            Client("ftp://x")
        with self.assertRaises(ValueError):
            Client(node.url, coalesce=Coalesce(max_tasks=5000))


class Retries(unittest.TestCase):
    def test_a_lost_answer_is_retried_with_the_same_key(self) -> None:
        proxy = FaultyProxy(node.port)
        pc = Client(proxy.url, token=node.admin_token, retry_base=0.001)
        try:
            topic = uniq("py.retry")
            proxy.drop_answers = 1
            r = pc.submit({"topic": topic, "delay": "1h", "target": NOWHERE})
            self.assertFalse(r["created"], "the second attempt found the task the first wrote")
            keys = [json.loads(b)["key"] for m, p, b in proxy.seen if p == "/v1/tasks"]
            self.assertEqual(len(keys), 2)
            self.assertEqual(keys[0], keys[1])
            self.assertEqual(len(c.list(topic=topic)["tasks"]), 1, "one task written")
            # Without a key (auto_key off) an answer lost after sending is not retried.
            with Client(proxy.url, token=node.admin_token, retry_base=0.001, auto_key=False) as nk:
                proxy.drop_answers = 1
                with self.assertRaises(NetworkError):
                    nk.submit({"topic": topic, "delay": "1h", "target": NOWHERE})
        finally:
            pc.close()
            proxy.stop()

    def test_503_retry_after(self) -> None:
        proxy = FaultyProxy(node.port)
        pc = Client(proxy.url, token=node.admin_token, retries=2)
        try:
            proxy.unavailable, proxy.retry_after = 2, "1"
            t0 = time.time()
            r = pc.submit({"topic": uniq("py.503"), "delay": "1h", "target": NOWHERE})
            self.assertTrue(r["created"])
            self.assertGreaterEqual(time.time() - t0, 1.9, "waited Retry-After twice")
            proxy.unavailable, proxy.retry_after = 10, "0"
            with self.assertRaises(UnavailableError) as cm:
                pc.get(r["id"])
            self.assertEqual(cm.exception.retry_after, 0)
            self.assertEqual(proxy.unavailable, 7, "three attempts (retries=2)")
            proxy.unavailable, proxy.retry_after = 1, "600"
            with self.assertRaises(UnavailableError):
                pc.get(r["id"])  # too long to wait: given up at once
        finally:
            pc.close()
            proxy.stop()


class Coalescing(unittest.TestCase):
    def test_concurrent_submits_share_batch_calls(self) -> None:
        proxy = FaultyProxy(node.port)
        pc = Client(proxy.url, token=node.admin_token)
        topic = uniq("py.co")
        results: dict = {}
        start = threading.Barrier(16)

        def worker(w: int) -> None:
            start.wait()
            for j in range(10):
                i = w * 10 + j
                req = {"topic": "bad topic", "target": NOWHERE} if i == 7 else {"topic": topic, "key": f"k{i % 150}", "delay": "1h", "target": NOWHERE}
                try:
                    results[i] = pc.submit(req)  # type: ignore[arg-type]
                except Exception as e:  # noqa: BLE001
                    results[i] = e

        try:
            threads = [threading.Thread(target=worker, args=(w,)) for w in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertIsInstance(results[7], InvalidError)
            self.assertEqual(results[7].status, 400)
            ok = [r for i, r in results.items() if i != 7]
            self.assertTrue(all(not isinstance(r, Exception) for r in ok), [r for r in ok if isinstance(r, Exception)][:3])
            self.assertEqual(sum(1 for r in ok if r["created"]), 150, "k0…k149 created once each, the repeats found")
            self.assertEqual(len({r["id"] for r in ok}), 150)
            batches = [p for m, p, b in proxy.seen if p == "/v1/tasks:batch"]
            self.assertGreater(len(batches), 0)
            self.assertLess(len(proxy.seen), 100, f"{len(proxy.seen)} calls for 160 submits")
        finally:
            pc.close()
            proxy.stop()


class WebhookSignatures(unittest.TestCase):
    def test_a_real_delivery_verifies(self) -> None:
        target = f"http://127.0.0.1:{rcv.port}/hooks/cancel?order=42"
        t = c.submit({"topic": uniq("py.hook"), "target": target, "payload": {"order": 42}})
        path, headers, body = rcv.wait(lambda call: call[1].get("ontime-task-id") == t["id"])
        sig = headers.get("ontime-signature")
        self.assertIsNotNone(sig)
        self.assertIn("v2=", sig)  # type: ignore[arg-type]
        self.assertIn("v1=", sig)  # type: ignore[arg-type]
        self.assertTrue(verify_signature(sig, target, body, node.secret))
        self.assertTrue(verify_signature(sig, ["https://other.example/", target], body, ["old-secret", node.secret]))
        self.assertFalse(verify_signature(sig, target, body, "wrong-secret"))
        self.assertFalse(verify_signature(sig, "http://127.0.0.1:1/hooks/cancel", body, node.secret), "v2 is bound to the target")
        self.assertTrue(verify_signature(sig, "http://127.0.0.1:1/hooks/cancel", body, node.secret, accept_v1=True), "v1 is not")
        self.assertFalse(verify_signature(sig, target, body + b" ", node.secret), "body changed")
        self.assertFalse(verify_signature(sig, target, body, node.secret, now=time.time() + 3600), "too old")
        self.assertFalse(verify_signature(None, target, body, node.secret))
        self.assertEqual(json.loads(body)["payload"], {"order": 42})


if __name__ == "__main__":
    unittest.main()
