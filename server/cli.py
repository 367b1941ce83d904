"""The `diffsql` command line: `serve` runs the server; `sql` and `subscribe` are thin HTTP
clients of a running server (they never open the database themselves, so they are safe to
use next to a live server).

Exit codes: 0 success, 1 the server reported an error, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8765"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="diffsql", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the HTTP server")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--data-dir", type=Path, help="directory of the durable database")
    g.add_argument("--memory", action="store_true", help="keep everything in memory")
    s.add_argument("--token", default=None, help="bearer token (default: $DIFFSQL_TOKEN)")
    s.add_argument(
        "--import-dir",
        type=Path,
        default=None,
        help="the only directory COPY ... FROM may read (default: <data-dir>/import)",
    )
    s.add_argument("--executor", choices=["inprocess", "spark"], default="inprocess")
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
    s.add_argument("--max-request-bytes", type=int, default=8 * 1024 * 1024)
    s.add_argument("--query-timeout", type=float, default=30.0)
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
    s.add_argument("--as-of-timeout", type=float, default=10.0)
    s.add_argument(
        "--iteration-limit",
        type=int,
        default=10_000,
        help="iterations a recursive view may take per update before it fails",
    )
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

    for name, help_text in (("sql", "run SQL statements"), ("subscribe", "follow a view")):
        c = sub.add_parser(name, help=help_text)
        c.add_argument("--url", default=os.environ.get("DIFFSQL_URL", DEFAULT_URL))
        c.add_argument("--token", default=None, help="bearer token (default: $DIFFSQL_TOKEN)")
        if name == "sql":
            c.add_argument("sql", help="statements separated by ';' ('-' reads stdin)")
        else:
            c.add_argument("view")
            c.add_argument("--no-snapshot", action="store_true")
            c.add_argument("--since", type=int, default=None)
    return p


def _token(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get("DIFFSQL_TOKEN") or None


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server.app import create_app
    from server.errors import ConfigError
    from server.executors import create_executor
    from server.settings import Settings

    try:
        settings = Settings(
            data_dir=args.data_dir,
            memory=args.memory,
            import_dir=args.import_dir,
            token=_token(args),
            executor=args.executor,
            spark_master=args.spark_master,
            spark_levels=args.spark_levels,
            history_retention=args.history_retention,
            max_request_bytes=args.max_request_bytes,
            query_timeout=args.query_timeout,
            write_timeout=args.write_timeout,
            max_result_bytes=args.max_result_bytes,
            as_of_timeout=args.as_of_timeout,
            iteration_limit=args.iteration_limit,
            checkpoint_interval=args.checkpoint_interval,
            hydrate_wait=args.hydrate_wait,
        )
        create_executor(settings).close()  # fail fast on an unavailable executor
    except (ConfigError, ValueError) as e:
        print(f"diffsql: {e}", file=sys.stderr)
        return 2
    app = create_app(settings)

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
    # Tokens are only accepted in headers, but a client may still put one in a URL: never log it.
    logging.getLogger("uvicorn.access").addFilter(_RedactSecrets())
    _Server(config).run()
    return 0


class _RedactSecrets(logging.Filter):
    """Blank out `access_token=` / `token=` query parameters in access-log lines."""

    _SECRET = re.compile(r"((?:access_)?token=)[^&\s]*", re.IGNORECASE)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self._SECRET.sub(r"\1REDACTED", a) if isinstance(a, str) else a
                for a in record.args
            )
        return True


def _headers(args: argparse.Namespace) -> dict[str, str]:
    token = _token(args)
    return {"Authorization": f"Bearer {token}"} if token else {}


def _sql(args: argparse.Namespace) -> int:
    import httpx

    text = sys.stdin.read() if args.sql == "-" else args.sql
    try:
        r = httpx.post(f"{args.url}/sql", json={"sql": text}, headers=_headers(args), timeout=None)
    except httpx.HTTPError as e:
        print(f"diffsql: cannot reach {args.url}: {e}", file=sys.stderr)
        return 2
    body: Any = r.json()
    print(json.dumps(body, indent=2))
    return 0 if r.status_code < 400 else 1


def _subscribe(args: argparse.Namespace) -> int:
    import httpx

    params: dict[str, Any] = {"snapshot": "false" if args.no_snapshot else "true"}
    if args.since is not None:
        params["since"] = args.since
    url = f"{args.url}/views/{args.view}/changes"
    try:
        with httpx.stream("GET", url, params=params, headers=_headers(args), timeout=None) as r:
            if r.status_code >= 400:
                r.read()
                print(r.text, file=sys.stderr)
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
    handler = {"serve": _serve, "sql": _sql, "subscribe": _subscribe}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
