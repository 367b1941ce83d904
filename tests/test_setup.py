"""The README's two set-up commands work as written on a fresh machine (issue #9).

The commands are read from README.md itself (the first `bash` block of "Set up and run"), and
run in a shell, in a copy of the repository in a temporary directory, with the `python3` on
`PATH` and a fresh virtual environment: the first must start a server that answers /health and
runs SQL, without installing Spark; the second must install the test dependencies and collect
the suite (`--collect-only`: running the whole suite again inside itself is CI's job, and CI
runs exactly that command, which `.ci/run` must hold verbatim). pip may use its cache.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from server_harness import REPO, free_port

SECTION = "## Set up and run"


def readme_commands() -> tuple[str, str]:
    """The server command and the test command, exactly as README.md writes them."""
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block is not None, "no bash block under 'Set up and run'"
    lines = [ln.strip() for ln in block.group(1).splitlines() if ln.strip()]
    assert len(lines) == 2, lines
    return lines[0], lines[1]


def _copy_repo(dest: Path) -> None:
    """A copy of the repository's files (what a clone holds, plus uncommitted work)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        shutil.copytree(
            REPO,
            dest,
            ignore=shutil.ignore_patterns(
                ".git", ".venv", "data", "__pycache__", "*.egg-info", ".*_cache", "build"
            ),
            dirs_exist_ok=True,
        )
        return
    for f in files:
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # A fresh shell: nothing of this test run's environment leaks into the new one.
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "DIFFSQL_URL", "DIFFSQL_TOKEN"):
        env.pop(name, None)
    return env


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, test_command = readme_commands()
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in [ln.strip() for ln in ci], ".ci/run must run the README's test command"


def test_readme_commands_use_a_venv_and_the_server_gets_no_spark() -> None:
    serve, test = readme_commands()
    for command in (serve, test):
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -e "), command
    install = serve.split("diffsql serve")[0]
    assert "spark" not in install and "[test" not in install, serve
    assert "[test,spark]" in test


def _externally_managed_python() -> Path | None:
    """A system Python 3.11 that refuses `pip install` outside a venv (Debian's), if any."""
    for python in (Path("/usr/bin/python3.11"), Path("/usr/bin/python3")):
        if python.exists() and list(Path("/usr/lib").glob("python3.11/EXTERNALLY-MANAGED")):
            return python
    return None


@pytest.mark.slow
@pytest.mark.skipif(_externally_managed_python() is None, reason="no externally-managed Python")
def test_readme_server_command_on_an_externally_managed_python(tmp_path: Path) -> None:
    """The first command as written, with `python3` Debian's Python 3.11."""
    python = _externally_managed_python()
    assert python is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    env = _env()
    env["PATH"] = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    refused = subprocess.run(
        ["python3", "-m", "pip", "install", "--dry-run", "--no-deps", "httpx"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "externally-managed" in refused.stderr + refused.stdout
    serve, _ = readme_commands()
    repo = tmp_path / "diffsql"
    repo.mkdir()
    _copy_repo(repo)
    _run_server_command(serve, repo, env, tmp_path / "serve.log")
    version = subprocess.run(
        [str(repo / ".venv" / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert version.stdout.strip() == "/usr"


def _run_server_command(serve: str, repo: Path, env: dict[str, str], log: Path) -> None:
    """Run the README's server command in `repo` (only its port changed to a free one), check
    the server answers /health and runs SQL, then stop it."""
    port = free_port()
    assert "--port 8765" in serve
    cmd = serve.replace("--port 8765", f"--port {port}")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", cmd],
            cwd=repo,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so the shell and the server stop together
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 1200  # the first install downloads the dependencies
        while True:
            assert proc.poll() is None, f"the server command exited: {log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no server: {log.read_text()[-4000:]}"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        r = httpx.post(
            f"{url}/sql",
            json={
                "sql": "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2), (2);"
                "CREATE VIEW v AS SELECT a, count(*) AS n FROM t GROUP BY a"
            },
            timeout=60,
        )
        assert r.status_code == 200, r.text
        rows = httpx.get(f"{url}/views/v/rows", timeout=60).json()["rows"]
        assert sorted(rows) == [[1, 1], [2, 2]]
        q = httpx.post(f"{url}/query", json={"sql": "SELECT sum(a) FROM t"}, timeout=60)
        assert q.json()["rows"] == [[5]]
        assert (repo / "data" / "store.duckdb").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.slow
def test_readme_setup_commands_in_a_fresh_venv(tmp_path: Path) -> None:
    serve, test = readme_commands()
    repo = tmp_path / "diffsql"
    repo.mkdir()
    _copy_repo(repo)
    env = _env()
    _run_server_command(serve, repo, env, tmp_path / "serve.log")
    venv_python = repo / ".venv" / "bin" / "python"
    # The server's command installed diffsql but not Spark.
    check = subprocess.run(
        [str(venv_python), "-c", "import server, duckdb; import pyspark"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert check.returncode != 0 and "pyspark" in check.stderr, check.stderr

    # The test command: it installs the test and Spark extras and collects the suite.
    assert test.endswith("pytest -q tests"), test
    r = subprocess.run(
        # (-n 0: collected in this process, listed one test a line, not by two workers)
        ["bash", "-c", f"{test} --collect-only -p no:cacheprovider -n 0"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-4000:])
    collected = re.search(r"(\d+) tests? collected", r.stdout)
    assert collected and int(collected.group(1)) > 100, r.stdout[-2000:]
    assert "tests/test_setup.py::test_readme_setup_commands_in_a_fresh_venv" in r.stdout
    check = subprocess.run(
        [str(venv_python), "-c", "import pyspark, pytest, hypothesis, networkx"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    assert shlex.split(test)[0] == "python3"
