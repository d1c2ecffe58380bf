"""server/spark-defaults.conf (the container's settings) equals embedded.SERVER_CONF."""

from __future__ import annotations

from pathlib import Path

from delta_connect_py.embedded import SERVER_CONF

SPARK_DEFAULTS = Path(__file__).resolve().parents[2] / "server" / "spark-defaults.conf"


def parse_spark_defaults(text: str) -> dict[str, str]:
    """Spark's properties file as spark-submit reads it: ``key<whitespace>value`` lines."""
    conf: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, value = line.split(None, 1)
        assert key not in conf, f"duplicate key {key} in {SPARK_DEFAULTS}"
        conf[key] = value.strip()
    return conf


def test_spark_defaults_equal_embedded_server_conf() -> None:
    assert parse_spark_defaults(SPARK_DEFAULTS.read_text()) == SERVER_CONF


def test_spark_defaults_leave_binding_to_the_launcher() -> None:
    conf = parse_spark_defaults(SPARK_DEFAULTS.read_text())
    assert not any(key.startswith("spark.connect.grpc.binding") for key in conf)
