"""Strom on Apache Spark: the ``strom`` data source and the warehouse loader.

``register(spark)`` makes ``spark.read.format("strom")`` (and ``readStream``, ``write``,
``writeStream``) available in a session. The option names are those of Spark's Kafka
source and sink (see ``strom.spark.options``).

Importing this package imports PySpark (``pip install 'strom[spark]'``); the option
parsing, planning and executor-side modules do not, so they are testable without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from strom.spark.source import StromDataSource

__all__ = ["StromDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``strom`` format with ``spark`` (idempotent)."""
    from strom.spark.source import StromDataSource

    spark.dataSource.register(StromDataSource)


def __getattr__(name: str) -> Any:
    if name == "StromDataSource":
        from strom.spark.source import StromDataSource

        return StromDataSource
    raise AttributeError(name)
