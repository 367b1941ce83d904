#!/usr/bin/env bash
# Manual end-to-end check of docker-compose.yml, both profiles (not run by .ci/run):
#
#   bash .ci/compose-smoke.sh            # as root; needs a running dockerd, docker-compose (v1/v2)
#                                        # and python3 with diffsql's dependencies (duckdb, pyarrow)
#
# Why stand-ins: the development machines reach PyPI and Debian's mirrors but no image registry,
# so python:3.11-slim and apache/spark cannot be pulled. This script builds local images with the
# same names and layout from a debootstrapped Debian bookworm (python3 there is 3.11):
#   - python:3.11-slim: python, python3 and pip on PATH from a venv at /usr/local (like the
#     official image's /usr/local/bin), only if no image of that name exists (a real one wins);
#   - local/spark-standin:$PYSPARK_VERSION: Java 17, python3, procps, and the official image's
#     layout (/opt/spark/{bin,sbin,jars,python/pyspark,python/lib/pyspark.zip and py4j zip},
#     SPARK_HOME, user spark (185), workdir /opt/spark/work-dir, a pass-through
#     /opt/entrypoint.sh), rebuilt from the pyspark wheel, which ships the same Spark.
# The compose file is used unchanged: SPARK_IMAGE picks the stand-in. The images stay after the
# run; REBUILD=1 rebuilds the stand-ins (labelled diffsql.standin), never a pulled image. The
# CA certificates this host trusts (/usr/local/share/
# ca-certificates) are copied into the stand-ins, so pip inside the containers goes through the
# same TLS-inspecting egress as the host's.
#
# Then it starts `docker-compose --profile spark up -d`, waits for both servers and the Spark
# worker, runs the README's 30-second example against diffsql (:8765), runs
# .ci/compose_smoke_check.py against diffsql-spark (:8766: COPY from the shared import
# directory, a join + aggregate view and a WITH RECURSIVE view, INSERT/DELETE, rows compared with
# DuckDB and BFS), checks that the Spark executor on the worker ran the tasks and read the load
# files from the shared volume, and always ends with `docker-compose --profile spark down -v`.
set -euo pipefail
cd "$(dirname "$0")/.."

export PYSPARK_VERSION=${PYSPARK_VERSION:-4.0.1}
export SPARK_IMAGE=${SPARK_IMAGE:-local/spark-standin:$PYSPARK_VERSION}
BASE_IMAGE=local/bookworm:base
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
REBUILD=${REBUILD:-0}
WORK=$(mktemp -d /tmp/compose-smoke.XXXXXX)
if docker compose version >/dev/null 2>&1; then DC=(docker compose); else DC=(docker-compose); fi
dc() { "${DC[@]}" --profile spark "$@"; }

log() { printf '\n=== %s  %s\n' "$(date +%T)" "$*"; }
cleanup() {
    rc=$?
    if [ "$rc" -ne 0 ]; then
        log "FAILED (exit $rc): last service logs"
        dc logs --no-color --tail=40 2>&1 | grep -v 'Downloading\|━' || true
    fi
    log "cleanup: ${DC[*]} --profile spark down -v"
    dc down -v --remove-orphans >/dev/null 2>&1 || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Whether image $1 is there to use: a missing image is built, and with REBUILD=1 so is a stand-in.
have_image() {
    local label
    label=$(docker image inspect -f '{{index .Config.Labels "diffsql.standin"}}' "$1" 2>/dev/null) \
        || return 1
    [ "$REBUILD" != 1 ] || [ "$label" != 1 ]
}

# Wait up to $2 seconds for command $1 (a string for eval) to succeed.
wait_for() {
    local what=$1 limit=$2 start=$SECONDS
    until eval "$what" >/dev/null 2>&1; do
        if (( SECONDS - start > limit )); then echo "timed out after ${limit}s: $what" >&2; return 1; fi
        sleep 5
    done
    echo "ok after $((SECONDS - start))s: $what"
}

# --- stand-in images -------------------------------------------------------------------------
extra_ca() {  # copy the host's extra CA certificates into build context $1
    mkdir -p "$1/extra-ca"
    cp /usr/local/share/ca-certificates/*.crt "$1/extra-ca/" 2>/dev/null || true
}

if ! have_image "$BASE_IMAGE"; then
    log "building $BASE_IMAGE with debootstrap (minbase bookworm from $MIRROR)"
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
    timeout 1200 debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" \
        || { tail -20 "$WORK/debootstrap.log"; exit 1; }
    rm -f "$WORK"/rootfs/var/cache/apt/archives/*.deb
    tar -C "$WORK/rootfs" -c . | docker import -c 'LABEL diffsql.standin=1' - "$BASE_IMAGE"
    rm -rf "$WORK/rootfs"
fi

if ! have_image python:3.11-slim; then
    log "building the stand-in python:3.11-slim"
    ctx=$WORK/python && mkdir -p "$ctx" && extra_ca "$ctx"
    cat >"$ctx/Dockerfile" <<EOF
FROM $BASE_IMAGE
LABEL diffsql.standin=1
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
COPY extra-ca/ /usr/local/share/ca-certificates/
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \\
 && rm -rf /var/lib/apt/lists/* \\
 && python3 -m venv /usr/local
CMD ["python3"]
EOF
    timeout 1200 docker build -q -t python:3.11-slim "$ctx"
fi

if ! have_image "$SPARK_IMAGE"; then
    case $SPARK_IMAGE in local/*) ;; *) echo "no image $SPARK_IMAGE (and it is not a local/ stand-in name)" >&2; exit 1;; esac
    log "building the Spark stand-in $SPARK_IMAGE from pyspark==$PYSPARK_VERSION"
    ctx=$WORK/spark && mkdir -p "$ctx" && extra_ca "$ctx"
    cat >"$ctx/entrypoint.sh" <<'EOF'
#!/bin/bash
# Stand-in for apache/spark's /opt/entrypoint.sh, pass-through mode only (as compose uses it).
set -eo pipefail
exec "$@"
EOF
    chmod +x "$ctx/entrypoint.sh"
    cat >"$ctx/Dockerfile" <<EOF
FROM $BASE_IMAGE
LABEL diffsql.standin=1
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \\
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 SPARK_HOME=/opt/spark
COPY extra-ca/ /usr/local/share/ca-certificates/
RUN groupadd --system --gid=185 spark \\
 && useradd --system --uid=185 --gid=spark -d /nonexistent spark \\
 && apt-get update \\
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless python3 python3-venv \\
      procps ca-certificates bash \\
 && rm -rf /var/lib/apt/lists/*
# The official image unpacks spark-X-bin-hadoop3.tgz into this layout; the wheel has the same
# bin, sbin and jars, and the zips are what the executors put on their Python path.
RUN python3 -m venv /tmp/v \\
 && /tmp/v/bin/pip install --no-cache-dir "pyspark==$PYSPARK_VERSION" \\
 && cd /tmp/v/lib/python3.11/site-packages \\
 && mkdir -p /opt/spark/python/lib /opt/spark/work-dir \\
 && mv pyspark/bin pyspark/sbin pyspark/jars /opt/spark/ \\
 && find pyspark py4j -name __pycache__ -prune -exec rm -rf {} + \\
 && python3 -m zipfile -c /opt/spark/python/lib/pyspark.zip pyspark/ \\
 && python3 -m zipfile -c "/opt/spark/python/lib/py4j-\$(/tmp/v/bin/python -c 'import importlib.metadata as m; print(m.version("py4j"))')-src.zip" py4j/ \\
 && mv pyspark /opt/spark/python/ \\
 && echo "Spark $PYSPARK_VERSION (stand-in built from the pyspark wheel)" >/opt/spark/RELEASE \\
 && chown -R spark:spark /opt/spark \\
 && cd / && rm -rf /tmp/v
COPY entrypoint.sh /opt/entrypoint.sh
WORKDIR /opt/spark/work-dir
USER spark
ENTRYPOINT ["/opt/entrypoint.sh"]
EOF
    timeout 1800 docker build -q -t "$SPARK_IMAGE" "$ctx"
fi

# --- compose up ------------------------------------------------------------------------------
log "${DC[*]} --profile spark up -d  (SPARK_IMAGE=$SPARK_IMAGE PYSPARK_VERSION=$PYSPARK_VERSION)"
dc down -v --remove-orphans >/dev/null 2>&1 || true
dc config -q
dc up -d
# Each service pip-installs diffsql (and the Spark ones Python 3.11 and pyspark) at start.
wait_for "curl -sf -m 5 http://127.0.0.1:8765/health" 900
wait_for "curl -sf -m 5 http://127.0.0.1:8766/health | grep -q '\"executor\":\"spark\"'" 900
wait_for "curl -sf -m 5 http://127.0.0.1:8080/json/ | grep -q '\"aliveworkers\" *: *1'" 600
curl -s http://127.0.0.1:8765/health; echo
curl -s http://127.0.0.1:8766/health; echo

# --- the README's 30-second example against diffsql (in-process executor) ---------------------
log "README's 30-second example on :8765"
P=http://127.0.0.1:8765
sqlp() { curl -s --fail-with-body -m 60 "$P/sql" -H 'content-type: application/json' -d "{\"sql\": \"$1\"}"; echo; }
sqlp "CREATE TABLE edges (src INTEGER NOT NULL, dst INTEGER NOT NULL); CREATE VIEW reach AS WITH RECURSIVE r(node) AS (SELECT 1 UNION SELECT e.dst FROM r JOIN edges e ON r.node = e.src) SELECT node FROM r"
timeout 10 curl -sN "$P/views/reach/changes?snapshot=true" >"$WORK/feed.txt" || true &
feed=$!
sleep 1
sqlp "INSERT INTO edges VALUES (1, 2), (2, 3), (3, 4)"
sqlp "DELETE FROM edges WHERE src = 2"
rows=$(curl -sf -m 60 "$P/views/reach/rows"); echo "$rows"
query=$(curl -sf -m 60 "$P/query" -H 'content-type: application/json' -d '{"sql": "SELECT r.node, count(e.dst) AS out_degree FROM reach r LEFT JOIN edges e ON e.src = r.node GROUP BY 1 ORDER BY 1"}')
echo "$query"
wait "$feed" || true
python3 - "$rows" "$query" "$WORK/feed.txt" <<'EOF'
import json, sys
rows, query, feed = json.loads(sys.argv[1]), json.loads(sys.argv[2]), open(sys.argv[3]).read()
assert sorted(rows["rows"]) == [[1], [2]], rows
assert query["rows"] == [[1, 1], [2, 0]], query
updates = [json.loads(l[6:]) for l in feed.splitlines()
           if l.startswith("data: ") and '"updates"' in l]
net = {}
for u in updates:
    for c in u["updates"]:
        net[c["row"][0]] = net.get(c["row"][0], 0) + c["diff"]
assert [u["timestamp"] for u in updates] == [1, 2, 3], updates
assert {k for k, v in net.items() if v} == {1, 2}, net
print(f"PASS diffsql: reach = {rows['rows']}, out_degree = {query['rows']}, "
      f"feed: {len(updates)} update events netting to {sorted(k for k, v in net.items() if v)}")
EOF

# --- diffsql-spark: views on the Spark cluster -----------------------------------------------
log "diffsql-spark on :8766 (.ci/compose_smoke_check.py)"
timeout 2400 python3 .ci/compose_smoke_check.py --url http://127.0.0.1:8766 \
    --container "$(dc ps -q diffsql-spark)"

log "evidence that the work ran on the Spark worker"
curl -s http://127.0.0.1:8080/json/ | python3 -c '
import json, sys
d = json.load(sys.stdin)
apps = [(a["name"], a["cores"], a["state"]) for a in d["activeapps"]]
print("master: alive workers", d["aliveworkers"], "cores used", d["coresused"], "apps", apps)
assert d["aliveworkers"] == 1 and any(n == "diffsql" and c > 0 for n, c, _ in apps), d'
dc logs --no-color spark-worker | grep -E 'Asked to launch executor' | tail -2
tasks=$(dc exec -T spark-worker sh -c 'cat /shared/work/app-*/*/stderr' | grep -c 'Executor: Finished task' || true)
loads=$(dc exec -T spark-worker sh -c 'cat /shared/work/app-*/*/stderr' | grep -c 'Reading File path: file:.*/shared/diffsql/loads/' || true)
echo "the worker's executor finished $tasks tasks and read $loads COPY load file(s) from /shared"
[ "$tasks" -gt 0 ] && [ "$loads" -gt 0 ]

log "PASS: docker-compose.yml works end to end (both profiles)"
