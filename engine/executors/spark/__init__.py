"""The Spark executor: operators' bulk work on Apache Spark, behind the executor boundary.

`driver` holds `SparkExecutor`; `arrow` the representation on Spark and the Arrow stages its
workers run; `cluster` the session and the data directory's files. pyspark and pyarrow are
imported only inside functions, so importing this package needs neither.
"""

from engine.executors.spark.driver import SparkExecutor

__all__ = ["SparkExecutor"]
