"""Group commit over HTTP: concurrent writers are committed together, each request keeping its
own timestamp and its all-or-nothing.

Eight clients write at once: single-row INSERTs, UPDATEs of their own rows, and requests that
fail part-way (an INSERT then a duplicate primary key). Afterwards every acknowledged request
is in the table and no refused one is, every acknowledged change has a timestamp of its own,
each view as of each such timestamp shows that write and not before it, a change feed read
across the whole run adds up to the view, every view equals DuckDB recomputing it, and all of
that survives a SIGKILL and restart.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import httpx
from server_harness import SSE, Feed, Server, multiset

VIEWS = {
    "per_writer": "SELECT w, count(*) AS n, sum(v) AS s FROM t GROUP BY w",
    "rows": "SELECT id, w, v FROM t WHERE v >= 0",
    "joined": "SELECT t.id, t.v, o.name FROM t JOIN owner o ON t.w = o.w",
}
WRITERS = 8
REQUESTS = 40


def _check_views(s: Server) -> None:
    for name, sql in VIEWS.items():
        assert multiset(s.rows(name)["rows"]) == multiset(s.query(sql)["rows"]), name


def test_concurrent_writers_each_keep_their_timestamp_and_atomicity(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        s.sql(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, w INTEGER, v INTEGER);"
            "CREATE TABLE owner (w INTEGER, name VARCHAR);"
            + "".join(f"INSERT INTO owner VALUES ({w}, 'writer {w}');" for w in range(WRITERS))
            + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items())
        )
        start_ts = s.rows("per_writer")["timestamp"]
        feed_source = SSE(s, "per_writer", since=start_ts)
        expected: list[dict[int, int]] = [{} for _ in range(WRITERS)]
        acked: list[list[tuple[str, int, int]]] = [[] for _ in range(WRITERS)]  # kind, id, ts
        refused: list[list[int]] = [[] for _ in range(WRITERS)]
        problems: list[str] = []

        def writer(w: int) -> None:
            with httpx.Client(base_url=s.url, timeout=60) as http:
                for k in range(REQUESTS):
                    key = w * 1000 + k
                    if k % 7 == 6:
                        # Fails on its second statement: its first must not be applied.
                        sql = (
                            f"INSERT INTO t VALUES ({key}, {w}, {k});"
                            f"INSERT INTO t VALUES ({w * 1000}, {w}, 0)"
                        )
                    elif k % 5 == 4 and expected[w]:
                        key = max(expected[w])
                        sql = f"UPDATE t SET v = v + 1 WHERE id = {key}"
                    else:
                        sql = f"INSERT INTO t VALUES ({key}, {w}, {k})"
                    r = http.post("/sql", json={"sql": sql})
                    if k % 7 == 6:
                        if r.status_code // 100 != 4:
                            problems.append(f"{sql}: {r.status_code} {r.text}")
                        refused[w].append(key)
                        continue
                    if r.status_code != 200:
                        problems.append(f"{sql}: {r.status_code} {r.text}")
                        continue
                    ts = r.json()["results"][0]["timestamp"]
                    if sql.startswith("UPDATE"):
                        expected[w][key] += 1
                        acked[w].append(("update", key, ts))
                    else:
                        expected[w][key] = k
                        acked[w].append(("insert", key, ts))

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not problems, problems[:3]

        # Every acknowledged request is in the table, exactly; no refused one is.
        want = {(key, w, v) for w in range(WRITERS) for key, v in expected[w].items()}
        got = {tuple(r) for r in s.query("SELECT id, w, v FROM t")["rows"]}
        assert got == want
        assert not {key for keys in refused for key in keys} & {r[0] for r in got}
        _check_views(s)

        # Each acknowledged change has a timestamp of its own, in each writer's order.
        stamps = [ts for a in acked for _, _, ts in a]
        assert len(stamps) == len(set(stamps)) == sum(len(e) for e in acked) > 0
        for a in acked:
            assert [ts for _, _, ts in a] == sorted(ts for _, _, ts in a)
        # As of its timestamp a view shows an insert; as of the timestamp before, it does not.
        for a in acked:
            for kind, key, ts in [x for x in a if x[0] == "insert"][:3]:
                at = {r[0] for r in s.rows("rows", as_of=ts)["rows"]}
                before = {r[0] for r in s.rows("rows", as_of=ts - 1)["rows"]}
                assert key in at and key not in before, (kind, key, ts)

        # The change feed delivers every timestamp's update once, in order, adding up to the view.
        final = s.rows("per_writer")["timestamp"]
        feed = Feed()
        feed.read_until(feed_source, final)
        feed_source.close()
        assert feed.seen == sorted(set(feed.seen))
        view = Counter(json.dumps(r) for r in s.rows("per_writer")["rows"])
        assert feed.contents == view

        # All of it is durable.
        s.kill()
        s.start()
        assert {tuple(r) for r in s.query("SELECT id, w, v FROM t")["rows"]} == want
        _check_views(s)
    finally:
        s.stop()
