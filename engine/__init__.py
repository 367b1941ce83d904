"""diffsql's differential dataflow engine.

Collections are multisets of `(data, time, diff)` updates with integer diffs; times are tuples
`(epoch, i1, i2, ...)` under the product partial order, one coordinate per enclosing iteration
scope. Operators keep their state in shared, compacted arrangements and act only on complete
times, which the progress tracker derives from the graph. See README.md for a tour.

Public API::

    df = Dataflow()
    handle, edges = df.new_input("edges")
    reach = roots.iterate(lambda r: r.join_map(edges.enter(r.scope), ...).concat(r).distinct())
    cap = reach.capture()
    handle.insert((1, 2)); handle.advance_to(1); df.run()

Layout, lowest layer first; a module imports only its own layer and those below it, never in a
cycle (tests/test_engine_layout.py checks every import, lazy and type-only ones included):
values and times (`lattice`, `order`, `errors`, ...); the data plane (`trace`, `kernels`,
`columnar/`); the executors behind their boundary (`executors/`); the graph and scheduler
(`progress`, `dataflow`); `operators/`; the Spark executor (`executors/spark/`); the fluent API
(`collection`); and this package, which re-exports the public names.
"""

from engine.budget import Budget, BudgetExceeded
from engine.collection import Arranged, Collection, Variable
from engine.dataflow import Dataflow, Operator, Scope
from engine.errors import DataflowPoisoned, EngineError, IterationLimitExceeded
from engine.lattice import Antichain, Time, advance_by, join, less_equal, meet
from engine.operators.capture import Capture, Probe
from engine.operators.input import InputHandle

__all__ = [
    "Antichain",
    "Arranged",
    "Budget",
    "BudgetExceeded",
    "Capture",
    "Collection",
    "Dataflow",
    "DataflowPoisoned",
    "EngineError",
    "InputHandle",
    "IterationLimitExceeded",
    "Operator",
    "Probe",
    "Scope",
    "Time",
    "Variable",
    "advance_by",
    "join",
    "less_equal",
    "meet",
]
