"""The columnar data plane: updates as arrays of int64, and compiled kernels over them.

Dependency arrows run one way: `times` (packed product-order times) <- `layout` (the columnar
batch) <- `kernels` (numba-compiled bulk work) and `reference` (the per-record reference tactic
that the kernels are tested against); `interning` (rows to stable ids) stands alone. The kernels
also use `parallel` (a large call split in two halves by key range on two cores) and `memory`
(NumPy's huge-page advice, off). Nothing here imports the dataflow, its operators or any
executor.
"""
