"""Paired A/B of two checkouts' servers on single-row writes over HTTP.

This machine's speed drifts by a third between runs, more than most changes to the write path
move `bench/views.py`'s HTTP figures. Here two servers, one from each checkout (a directory
with the code: `/work/main`, or a `git worktree` of another commit), are started on the
same TPC-H-shaped tables and views as `bench/views.py` (generated once, loaded by COPY into
each), and every single-row INSERT into lineitem is sent to both, the order alternating, so a
drift slows both. It prints each server's p50 and the median of the per-write ratios B/A (the
first tenth of the writes left out as warm-up), and checks that the two servers' views hold
the same rows at the end (exits non-zero otherwise). A checkout against itself gives a ratio
within about 2% of 1.

    python bench/paired_http.py /work/main /tmp/wt --sf 0.1 --writes 400

The last line is `paired_http: a_p50_ms=<x> b_p50_ms=<x> b_over_a=<x> views_equal=<true|false>`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import views as V  # noqa: E402
from support import free_port, same  # noqa: E402


class Served:
    """One checkout's server on its own data directory, with an HTTP client."""

    def __init__(self, repo: Path, tmp: Path, parquet: Path, tag: str) -> None:
        port = free_port()
        env = dict(os.environ)
        env["PYTHONPATH"] = str(repo)
        env.pop("DIFFSQL_TOKEN", None)
        self.log = tmp / f"server-{tag}.log"
        python = repo / ".venv" / "bin" / "python"
        self.proc = subprocess.Popen(
            [str(python if python.exists() else sys.executable), "-m", "server.cli", "serve",
             "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp / f"data-{tag}"),
             "--import-dir", str(parquet), "--log-level", "warning", "--write-timeout", "3600",
             "--query-timeout", "600"],
            cwd=repo, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=3600)
        deadline = time.monotonic() + 300  # a fresh checkout compiles its kernels first
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server {tag} did not start; see {self.log}")
            try:
                if self.http.get("/health", timeout=2).json().get("ready"):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    def sql(self, text: str) -> float:
        """Run `text`; the seconds the request took."""
        t0 = time.perf_counter()
        r = self.http.post("/sql", json={"sql": text})
        took = time.perf_counter() - t0
        if r.status_code != 200:
            raise RuntimeError(f"{text[:80]}...: {r.status_code} {r.text[:300]}")
        return took

    def rows(self, view: str) -> Counter[tuple[object, ...]]:
        return Counter(tuple(r) for r in self.http.get(f"/views/{view}/rows").json()["rows"])

    def stop(self) -> None:
        self.http.close()
        self.proc.terminate()
        self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path, help="checkout A (the baseline)")
    ap.add_argument("b", type=Path, help="checkout B")
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--writes", type=int, default=400, help="single-row INSERTs sent to each")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="diffsql-paired-http-") as d:
        tmp = Path(d)
        parquet = tmp / "parquet"
        parquet.mkdir()
        V.generate_tables(args.sf, args.seed, parquet)
        data = V.Data(args.sf, args.seed, generate=False)
        servers: list[Served] = []
        try:
            for repo, tag in ((args.a, "a"), (args.b, "b")):
                s = Served(repo.resolve(), tmp, parquet, tag)
                servers.append(s)
                s.sql(";".join(V.ddl(t) for t in V.TABLES) + ";" + ";".join(
                    f"COPY {t} FROM '{t}.parquet' (FORMAT parquet)" for t in V.TABLES))
                for name, q in V.VIEWS.items():
                    s.sql(f"CREATE VIEW {name} AS {q}")
            rng = random.Random(args.seed + 2)
            linenumbers = itertools.count(1_000_000)
            took: tuple[list[float], list[float]] = ([], [])
            for i in range(args.writes):
                row = V.Data.lineitem_row(
                    rng, rng.randint(1, data.n_orders), next(linenumbers),
                    V.START + dt.timedelta(days=rng.randrange(V.ORDER_DAYS - 151)),
                    data.n_part, data.n_supp)
                text = "INSERT INTO lineitem VALUES (" + ", ".join(map(V.sql_literal, row)) + ")"
                for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                    took[k].append(servers[k].sql(text))
            equal = all(same(servers[0].rows(v), servers[1].rows(v)) for v in V.VIEWS)
        finally:
            for s in servers:
                s.stop()
    skip = args.writes // 10
    a, b = took[0][skip:], took[1][skip:]
    ratio = statistics.median(y / x for x, y in zip(a, b, strict=True))
    print(f"A {args.a}: p50 {statistics.median(a) * 1e3:.2f} ms; "
          f"B {args.b}: p50 {statistics.median(b) * 1e3:.2f} ms")
    print(f"paired_http: a_p50_ms={statistics.median(a) * 1e3:.2f} "
          f"b_p50_ms={statistics.median(b) * 1e3:.2f} b_over_a={ratio:.3f} "
          f"views_equal={'true' if equal else 'false'}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
