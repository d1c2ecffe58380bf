"""Observed metrics as a Connect server sends them: an observation a busy driver sent empty
counts as none (``plans.spark.observed_metrics``), so that the caller runs its query instead
of reading values that are not there."""

from __future__ import annotations

import pyspark.sql.connect.proto as pb2
from pyspark.sql.connect.client.core import PlanObservedMetrics
from pyspark.sql.metrics import ExecutionInfo

from delta_connect_py.plans.spark import _OBSERVATION, observed_metrics


def _long(value: int) -> pb2.Expression.Literal:
    return pb2.Expression.Literal(long=value)


def _info(*observations: PlanObservedMetrics) -> ExecutionInfo:
    return ExecutionInfo(None, list(observations))


def test_the_observation_s_values_are_read_by_name() -> None:
    sent = PlanObservedMetrics(_OBSERVATION, [_long(7), _long(2)], ["sizeInBytes", "numOfFiles"])
    other = PlanObservedMetrics("someone else's", [_long(1)], ["sizeInBytes"])
    assert observed_metrics(_info(other, sent)) == {"sizeInBytes": 7, "numOfFiles": 2}


def test_an_observation_sent_empty_is_none() -> None:
    """Spark's server waits 100 ms for a job's observed metrics, then sends an empty row."""
    assert observed_metrics(_info(PlanObservedMetrics(_OBSERVATION, [], []))) is None


def test_no_observation_is_none() -> None:
    assert observed_metrics(None) is None
    assert observed_metrics(_info()) is None
