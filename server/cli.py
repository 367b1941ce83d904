"""The `diffsql` command line: `serve` runs the server; `sql` and `subscribe` are thin HTTP
clients of a running server (they never open the database themselves, so they are safe to
use next to a live server).

Exit codes: 0 success, 1 the server reported an error, 2 bad usage or configuration.

`sql` and `query` print results as aligned tables when standard output is a terminal, and
the server's JSON response when it is not (a pipe or a file) or with `--json`, so scripts
always read JSON and people always read tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

DEFAULT_URL = "http://127.0.0.1:8765"

_ENVIRONMENT = f"""environment variables:
  DIFFSQL_URL    server URL for sql, query and subscribe (default {DEFAULT_URL})
  DIFFSQL_TOKEN  bearer token (serve: required of clients; clients: sent to the server)
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diffsql",
        description=__doc__.split("\n\n")[0],
        epilog=_ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the HTTP server")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--data-dir", type=Path, help="directory of the durable database")
    g.add_argument("--memory", action="store_true", help="keep everything in memory")
    t = s.add_mutually_exclusive_group()
    t.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="read the bearer token from this file (preferred, with $DIFFSQL_TOKEN)",
    )
    t.add_argument(
        "--token",
        default=None,
        help="bearer token; visible to every user of the machine in the process list, so "
        "prefer $DIFFSQL_TOKEN or --token-file (default: $DIFFSQL_TOKEN)",
    )
    s.add_argument(
        "--import-dir",
        type=Path,
        default=None,
        help="the only directory COPY ... FROM may read (default: <data-dir>/import)",
    )
    s.add_argument("--executor", choices=["inprocess", "columnar", "spark"], default="inprocess",
                   help="where views' dataflows run: inprocess (record by record, the default), "
                   "columnar (compiled kernels over columns, in this process) or spark")
    s.add_argument("--spark-master", default=None, help="Spark master URL (with --executor spark)")
    s.add_argument(
        "--spark-levels",
        default=None,
        help="keep Spark arrangements as Parquet levels in this directory, shared by the "
        "cluster at the same path (default: Spark's block managers)",
    )
    s.add_argument(
        "--history-retention",
        type=int,
        default=10_000,
        help="timestamps of change history kept for resumption (default 10000)",
    )
    s.add_argument(
        "--max-request-bytes",
        type=int,
        default=8 * 1024 * 1024,
        help="largest request body accepted, in bytes (default 8388608, 8 MiB)",
    )
    s.add_argument(
        "--max-statements",
        type=int,
        default=1000,
        help="statements one request may hold (default 1000)",
    )
    s.add_argument(
        "--max-result-rows",
        type=int,
        default=100_000,
        help="rows a SELECT or /query may return before it fails with result_too_large "
        "(default 100000)",
    )
    s.add_argument(
        "--query-timeout",
        type=float,
        default=30.0,
        help="seconds a SELECT or /query may run (default 30)",
    )
    s.add_argument(
        "--query-concurrency",
        type=int,
        default=None,
        help="read queries (SELECT, /query) that run at once; others wait for a slot up to "
        "--query-timeout, then get 503 busy (default: twice the cores, 2 to 8)",
    )
    s.add_argument(
        "--query-memory-limit",
        default="1GB",
        help="DuckDB memory limit of a SELECT or /query (default 1GB)",
    )
    s.add_argument(
        "--as-of-timeout",
        type=float,
        default=10.0,
        help="default seconds rows?as_of=T waits for the view (default 10)",
    )
    s.add_argument(
        "--subscriber-queue-limit",
        type=int,
        default=10_000,
        help="messages a slow change-feed client may fall behind before it is disconnected "
        "(default 10000)",
    )
    s.add_argument(
        "--subscriber-queue-bytes",
        type=int,
        default=8 * 1024 * 1024,
        help="bytes of unsent messages (as sent) a slow change-feed client may fall behind "
        "before it is disconnected (default 8388608, 8 MiB; at least 1024)",
    )
    s.add_argument(
        "--write-timeout",
        type=float,
        default=60.0,
        help="seconds a write may run before COMMIT; past it, it is rolled back (default 60)",
    )
    s.add_argument(
        "--max-result-bytes",
        type=int,
        default=64 * 1024 * 1024,
        help="largest SELECT result in bytes; larger ones are refused (default 64 MiB)",
    )
    s.add_argument(
        "--iteration-limit",
        type=int,
        default=10_000,
        help="iterations a recursive view may take per update before it fails",
    )
    s.add_argument("--view-time-budget", type=float, default=300.0,
                   help="seconds one view may compute per update (or at creation) before it "
                        "fails with budget_exceeded (default 300)")
    s.add_argument("--view-work-budget", type=int, default=100_000_000,
                   help="join outputs one view may produce per update (default 100,000,000)")
    s.add_argument("--view-memory-budget", type=int, default=50_000_000,
                   help="records one view may hold in its arrangements (default 50,000,000)")
    s.add_argument(
        "--checkpoint-interval",
        type=int,
        default=256,
        help="checkpoint view history every N timestamps; a restart after a crash replays at "
        "most N (default 256)",
    )
    s.add_argument(
        "--hydrate-wait",
        type=float,
        default=30.0,
        help="seconds a request waits for views hydrating at start-up before a 503 (default 30)",
    )
    s.add_argument("--log-level", default="info")

    env_url = os.environ.get("DIFFSQL_URL")
    for name, help_text in (
        ("sql", "run SQL statements (POST /sql)"),
        ("query", "run a read-only query over tables and views (POST /query)"),
        ("subscribe", "follow a view's changes"),
    ):
        c = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=_ENVIRONMENT,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        c.add_argument(
            "--url",
            default=env_url or DEFAULT_URL,
            help=f"server URL (default: $DIFFSQL_URL if set, else {DEFAULT_URL}"
            + (f"; now {env_url}" if env_url else "")
            + ")",
        )
        c.add_argument("--token", default=None, help="bearer token (default: $DIFFSQL_TOKEN)")
        if name in ("sql", "query"):
            c.add_argument(
                "sql",
                help="statements separated by ';' ('-' reads stdin)"
                if name == "sql"
                else "one SELECT ('-' reads stdin)",
            )
            c.add_argument(
                "--json",
                action="store_true",
                help="print the server's JSON response (the default when output is not a "
                "terminal); without it a terminal gets tables",
            )
        else:
            c.add_argument("view")
            c.add_argument("--no-snapshot", action="store_true")
            c.add_argument("--since", type=int, default=None)
    return p


def _token(args: argparse.Namespace) -> str | None:
    """--token, else --token-file (its first line), else $DIFFSQL_TOKEN."""
    path = getattr(args, "token_file", None)
    if path is not None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read --token-file {path}: {e}") from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise ValueError(f"--token-file {path} is empty")
        return token
    return args.token or os.environ.get("DIFFSQL_TOKEN") or None


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server.app import create_app
    from server.errors import ConfigError
    from server.executors import create_executor
    from server.redact import install as install_redaction
    from server.settings import Settings

    try:
        token = _token(args)
        settings = Settings(
            data_dir=args.data_dir,
            memory=args.memory,
            import_dir=args.import_dir,
            token=token,
            executor=args.executor,
            spark_master=args.spark_master,
            spark_levels=args.spark_levels,
            history_retention=args.history_retention,
            max_request_bytes=args.max_request_bytes,
            max_statements=args.max_statements,
            max_result_rows=args.max_result_rows,
            query_timeout=args.query_timeout,
            query_memory_limit=args.query_memory_limit,
            **({} if args.query_concurrency is None
               else {"query_concurrency": args.query_concurrency}),
            write_timeout=args.write_timeout,
            max_result_bytes=args.max_result_bytes,
            as_of_timeout=args.as_of_timeout,
            subscriber_queue_limit=args.subscriber_queue_limit,
            subscriber_queue_bytes=args.subscriber_queue_bytes,
            iteration_limit=args.iteration_limit,
            view_time_budget=args.view_time_budget,
            view_work_budget=args.view_work_budget,
            view_memory_budget=args.view_memory_budget,
            checkpoint_interval=args.checkpoint_interval,
            hydrate_wait=args.hydrate_wait,
        )
        create_executor(settings).close()  # fail fast on an unavailable executor
    except (ConfigError, ValueError) as e:
        print(f"diffsql: {e}", file=sys.stderr)
        return 2
    app = create_app(settings)
    # Threads that serialise or plan hold the GIL for up to the switch interval at a time; a
    # shorter one keeps the event loop (and so /health and the feeds) responsive beside them.
    sys.setswitchinterval(0.001)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # End change feeds first: open streams would otherwise hold up a graceful exit.
            db = getattr(app.state, "db", None)
            if db is not None:
                try:
                    asyncio.get_running_loop().call_soon_threadsafe(db.end_feeds)
                except RuntimeError:
                    pass
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5
    )
    # Tokens are only accepted in headers, but a client may still put one in a URL: never log
    # it, nor a header, at any level (uvicorn configured its loggers in Config()).
    install_redaction(token)
    if args.token:
        logging.getLogger("uvicorn.error").warning(
            "--token is visible in the process list; prefer DIFFSQL_TOKEN or --token-file"
        )
    _Server(config).run()
    return 0


def _headers(args: argparse.Namespace) -> dict[str, str]:
    token = _token(args)
    return {"Authorization": f"Bearer {token}"} if token else {}


def _sql(args: argparse.Namespace) -> int:
    import httpx

    text = sys.stdin.read() if args.sql == "-" else args.sql
    path = "/sql" if args.command == "sql" else "/query"
    try:
        r = httpx.post(
            f"{args.url}{path}", json={"sql": text}, headers=_headers(args), timeout=None
        )
    except httpx.HTTPError as e:
        print(f"diffsql: cannot reach {args.url}: {e}", file=sys.stderr)
        return 2
    try:
        body: Any = r.json()
    except ValueError:
        print(f"diffsql: HTTP {r.status_code}: {r.text[:2000]}", file=sys.stderr)
        return 1
    if args.json or not sys.stdout.isatty():
        print(json.dumps(body, indent=2))
    elif r.status_code >= 400:
        print(_format_error(body), file=sys.stderr)
    elif args.command == "query":
        print(_format_result(body))
    else:
        for res in body.get("results", []):
            print(_format_result(res))
        for f in body.get("failed_views", []):
            print(f"view {f['name']} failed: {_format_error(f)}", file=sys.stderr)
    return 0 if r.status_code < 400 else 1


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return v
    return json.dumps(v)


def format_table(columns: list[str], rows: list[list[Any]]) -> str:
    """Rows as an aligned text table (numbers right-aligned, NULL spelled out), with a count."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    numeric = [
        bool(rows) and all(isinstance(r[i], int | float) or r[i] is None for r in rows)
        for i in range(len(columns))
    ]

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return " | ".join(parts).rstrip()

    out = [line(list(columns)), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def _format_result(res: dict[str, Any]) -> str:
    """One statement's result for a person: a table for a query, a summary line otherwise."""
    if "plan" in res:
        return str(res["plan"])
    if "columns" in res and "rows" in res:
        return format_table(list(res["columns"]), list(res["rows"]))
    words = [str(res.get("statement", "OK"))]
    if res.get("name") is not None:
        words.append(str(res["name"]))
    if "rowcount" in res:
        words.append(f"{res['rowcount']} row{'' if res['rowcount'] == 1 else 's'}")
    for flag, no in (("created", "already exists"), ("dropped", "did not exist")):
        if res.get(flag) is False:
            words.append(f"({no}, nothing changed)")
    if "timestamp" in res:
        words.append(f"at timestamp {res['timestamp']}")
    return " ".join(words)


def _format_error(body: Any) -> str:
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return f"error: {body}"
    where = ""
    if err.get("line") is not None:
        where = f" (line {err['line']}, column {err.get('column')})"
    return f"error [{err.get('code')}]: {err.get('message')}{where}"


def _subscribe(args: argparse.Namespace) -> int:
    import httpx

    params: dict[str, Any] = {"snapshot": "false" if args.no_snapshot else "true"}
    if args.since is not None:
        params["since"] = args.since
    # the name as one path segment: a view's name may hold '?', '#' or '%'
    url = f"{args.url}/views/{quote(args.view, safe='')}/changes"
    try:
        with httpx.stream("GET", url, params=params, headers=_headers(args), timeout=None) as r:
            if r.status_code >= 400:
                r.read()
                print(r.text, file=sys.stderr)
                return 1
            if not r.headers.get("content-type", "").startswith("text/event-stream"):
                # not a feed (a proxy's page, or --url naming something else)
                r.read()
                print(f"diffsql: {url} did not answer with a change feed: HTTP "
                      f"{r.status_code} {r.headers.get('content-type', '')}", file=sys.stderr)
                return 1
            event = "message"
            for line in r.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    print(json.dumps({"type": event, **data}), flush=True)
                    if event == "error":
                        return 1
    except KeyboardInterrupt:
        return 0
    except httpx.HTTPError as e:
        print(f"diffsql: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "url", None):
        args.url = args.url.rstrip("/")  # paths are appended: http://host:port/ + /sql
    handler = {"serve": _serve, "sql": _sql, "query": _sql, "subscribe": _subscribe}[
        args.command
    ]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
