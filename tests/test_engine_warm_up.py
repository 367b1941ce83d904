"""The columnar executor's warm-up loads every kernel signature a reachability loop calls.

A numba kernel called with a new signature (argument types, a read-only array among them) is
compiled, or loaded from its cache, on that first call: tens of milliseconds, and a config-b
hydration of the reachability benchmark is 20-40 ms. So `kernels.warm_up` and
`updates.warm_up`, run when a `ColumnarExecutor` is made, must leave nothing for the first
hydration or the first update to load (nor for a batch large enough to be sorted on two
cores, as a config-a hydration's are). Run in a fresh interpreter: in this one, earlier tests
have called most kernels already, and the check could not fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import random, sys
import numba
from engine.columnar import interning, kernels, times, updates, word_sort
from engine.dataflow import Dataflow
from engine.executors.columnar import ColumnarExecutor
from engine.fields import Fields, JoinFields

MODULES = (interning, kernels, times, updates, word_sort)


def signatures():
    out = {}
    for m in MODULES:
        for name in dir(m):
            f = getattr(m, name)
            if isinstance(f, numba.core.registry.CPUDispatcher):
                out[m.__name__ + "." + name] = set(f.signatures)
    return out


df = Dataflow(executor=ColumnarExecutor())
before = signatures()
edges_in, edges = df.new_input("edges")
roots_in, roots = df.new_input("roots")


def body(reach):
    e = edges.enter(reach.scope)
    return reach.map(Fields(1, 0)).join_map(e, JoinFields("left", "right")).concat(reach).distinct()


reach = roots.map(lambda r: (r, r)).iterate(body)
cap = reach.capture(history=False, drain=False)
rng = random.Random(7)
n = 300
window = [(rng.randrange(n), rng.randrange(n)) for _ in range(600)]
edges_in.insert_many(window)
roots_in.insert_many(rng.sample(range(n), 5))
epoch = 1
edges_in.advance_to(epoch)
roots_in.advance_to(epoch)
df.run()
for batch in (1, 1, 1, 10, 100, 100):
    for _ in range(batch):
        new = (rng.randrange(n), rng.randrange(n))
        edges_in.remove(window.pop(0))
        edges_in.insert(new)
        window.append(new)
        epoch += 1
        edges_in.advance_to(epoch)
        roots_in.advance_to(epoch)
    df.run()
# A batch large enough to be sorted as words on two cores (a hydration's, at config a).
import numpy as np
from engine.columnar import parallel
big = np.random.default_rng(1).integers(0, 1 << 20, parallel.MIN_SORTED)
kernels.consolidate(big, big % 7, big % 5, np.ones_like(big))
after = signatures()
new = sorted(f"{k}{s}" for k in after for s in after[k] - before.get(k, set()))
print("\n".join(new))
print("reach", len(cap.current()))
"""


def test_warm_up_leaves_no_kernel_signature_to_a_reachability_loop() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith("reach ") and int(lines[-1].split()[1]) > 5
    assert lines[:-1] == [], "signatures loaded after warm-up:\n" + "\n".join(lines[:-1])
