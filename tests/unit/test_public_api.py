"""The public surface stands alone: typed arguments, exported types, docstrings for users.

A user reads ``help(DeltaTable.load_cdf)`` or an IDE's tooltip, not the maintainers' module
docstrings: every public method says what it takes, returns and raises, with an example.
"""

from __future__ import annotations

import inspect
import re

import pytest

import delta_connect_py
from delta_connect_py import DeltaTable, Snapshot

PUBLIC_CLASSES = (DeltaTable, Snapshot)
#: Methods and properties for the library's own modules, not documented for users.
INTERNAL = {
    "adopt_observed_state",
    "checkpoint_rows",
    "check_worker_file_access",
    "commit_timestamps",
    "loaded_segment",
    "replay_config",
    "stats_parsed_to_parse_bytes",
}


def public_members(cls: type) -> list[tuple[str, object]]:
    return [
        (name, member)
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
        and name not in INTERNAL
        and (callable(member) or isinstance(member, property))
    ]


def documented_methods() -> list[tuple[str, object]]:
    """Methods whose docstrings must have the full form (arguments, returns, raises, example)."""
    return [
        (f"DeltaTable.{name}", getattr(DeltaTable, name))
        for name in (
            "for_path",
            "snapshot",
            "create_checkpoint",
            "cleanup_metadata",
            "history",
            "load_cdf",
            "cdf_file_changes",
            "stream_cdf",
        )
    ] + [("Snapshot.to_df", Snapshot.to_df), ("Snapshot.update", Snapshot.update)]


@pytest.mark.parametrize(("name", "method"), documented_methods())
def test_public_methods_document_arguments_returns_raises_and_an_example(
    name: str, method: object
) -> None:
    doc = inspect.getdoc(method) or ""
    parameters = [p for p in inspect.signature(method).parameters if p not in ("self", "cls")]  # type: ignore[arg-type]
    missing = [
        section
        for section in ("Returns:", "Raises:", "Example:", *(["Args:"] if parameters else []))
        if section not in doc
    ]
    assert missing == [], f"{name}: no {missing}"
    undocumented = [p for p in parameters if not re.search(rf"\b{p}\b", doc)]
    assert undocumented == [], f"{name} does not describe {undocumented}"


@pytest.mark.parametrize("cls", PUBLIC_CLASSES)
def test_public_members_never_send_users_to_module_docs(cls: type) -> None:
    for name, member in public_members(cls):
        doc = inspect.getdoc(member) or ""
        assert doc, f"{cls.__name__}.{name} has no docstring"
        assert not re.search(r"[Ss]ee ``delta_connect_py\.", doc), f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", PUBLIC_CLASSES)
def test_public_arguments_are_typed_without_any(cls: type) -> None:
    for name, member in public_members(cls):
        function = member.fget if isinstance(member, property) else member
        annotations = getattr(function, "__annotations__", {})
        loose = {arg: a for arg, a in annotations.items() if arg != "return" and "Any" in str(a)}
        assert loose == {}, f"{cls.__name__}.{name}"


def test_filter_and_offset_types_are_exported() -> None:
    for name in (
        "Filter",
        "FilterTerm",
        "FilterValue",
        "DeltaSourceOffset",
        "CdfBatch",
        "FileChanges",
        "CheckpointResult",
        "State",
        "__version__",
    ):
        assert name in delta_connect_py.__all__
        assert getattr(delta_connect_py, name) is not None
    assert "Any" not in str(inspect.signature(DeltaTable.stream_cdf).return_annotation)


def test_properties_that_run_a_spark_job_say_so() -> None:
    for prop in (Snapshot.transactions, Snapshot.state):
        doc = inspect.getdoc(prop) or ""
        assert "runs the state job" in doc and "logged" in doc
