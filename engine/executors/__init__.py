"""Executors other than the embedded default (`engine.executor.InProcessExecutor`).

`columnar.ColumnarExecutor` runs arrangements, join and the counting reduces on columnar runs
with compiled kernels. (The Spark executor still lives in `engine.spark_executor`.)
"""
