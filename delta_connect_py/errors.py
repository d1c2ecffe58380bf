"""Errors raised by delta_connect_py.

Responsibility: one root, :class:`DeltaError`, shaped like pyspark's errors (``error_class`` plus
``message_parameters``), and one subclass per Delta error class we raise. Each message says what
was wrong, with which version and path, and what the user can do.

Invariants: every error the library can detect before or instead of a Spark job is raised as a
``DeltaError`` subclass; the rendered message always starts with ``[ERROR_CLASS]``. A DeltaError
made from a Spark or gRPC failure keeps that failure as ``cause`` and is raised without the
failure chained (one line plus our message, not the server's trace). Messages name this
library's calls, never SQL a vanilla Spark Connect server cannot run. This module
imports nothing but the standard library, so the pure ``protocol`` layer may raise these too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar


class DeltaError(Exception):
    """Root of every error raised by delta_connect_py."""

    error_class: ClassVar[str] = "DELTA_ERROR"
    template: ClassVar[str] = "{message}"

    def __init__(self, **message_parameters: object) -> None:
        self.message_parameters: dict[str, str] = {
            key: str(value) for key, value in message_parameters.items()
        }
        #: The Spark or gRPC failure this error was made from (None when we detected it).
        self.cause: BaseException | None = None
        super().__init__(f"[{self.error_class}] {self.template.format(**self.message_parameters)}")

    def getErrorClass(self) -> str:
        return self.error_class

    def getMessageParameters(self) -> Mapping[str, str]:
        return self.message_parameters


class MissingDeltaTableError(DeltaError):
    error_class = "DELTA_MISSING_DELTA_TABLE"
    template = (
        "{path} is not a Delta table: no commit or checkpoint files were found in {log_path}. "
        "{advice}"
    )

    def __init__(self, *, path: object, log_path: object, advice: object = None) -> None:
        # advice is derived; accepted so that a decoded error can be rebuilt
        super().__init__(path=path, log_path=log_path, advice=_missing_table_advice(str(path)))


def _missing_table_advice(path: str) -> str:
    """What to do: a path naming a ``_delta_log`` folder most likely meant its table."""
    parent, _, name = path.rstrip("/").rpartition("/")
    if name == "_delta_log" and parent.rstrip("/:") not in ("", "file"):
        return f"The path names a table's log folder: give the table's own path, {parent}."
    return "Check the path, or create the table with a Delta writer first."


class VersionsNotContiguousError(DeltaError):
    error_class = "DELTA_VERSIONS_NOT_CONTIGUOUS"
    template = (
        "Versions ({versions}) are not contiguous. A gap in the delta log between versions "
        "{start_version} and {end_version} was detected while trying to load version "
        "{version_to_load} of {path}. Restore the missing commit files, or load a version "
        "before the gap."
    )


class TruncatedTransactionLogError(DeltaError):
    error_class = "DELTA_TRUNCATED_TRANSACTION_LOG"
    template = (
        "{path}: Unable to reconstruct state at version {version} as the transaction log has "
        "been truncated due to manual deletion or the log retention policy "
        "(delta.logRetentionDuration={log_retention}) and checkpoint retention policy "
        "(delta.checkpointRetentionDuration={checkpoint_retention}). {advice}"
    )

    def __init__(self, **parameters: object) -> None:
        """``path``, ``version``, ``log_retention``, ``checkpoint_retention`` and
        ``earliest_version`` (``"none"``: no version can be rebuilt); ``advice`` is derived
        from it (a decoded error's is replaced)."""
        earliest = str(parameters["earliest_version"])
        parameters["advice"] = (
            "No version can be rebuilt from the files left: restore the deleted log files."
            if earliest == "none"
            else f"Load a version at or after {earliest}."
        )
        super().__init__(**parameters)


class MissingPartFilesError(DeltaError):
    error_class = "DELTA_MISSING_PART_FILES"
    template = (
        "Couldn't find all part files of the checkpoint version: {version} in {path}. "
        "Restore the missing parts or delete the incomplete checkpoint's _last_checkpoint hint."
    )


class LogFileNotFoundError(DeltaError):
    error_class = "DELTA_LOG_FILE_NOT_FOUND"
    template = (
        "Unable to retrieve the delta log files to construct table version {version} starting "
        "from checkpoint version {checkpoint_version} at {path}."
    )


class VersionNotFoundError(DeltaError):
    error_class = "DELTA_VERSION_NOT_FOUND"
    template = (
        "Cannot time travel {path} to version {version}. Available versions: "
        "[{earliest}, {latest}]."
    )


class StateRecoverError(DeltaError):
    error_class = "DELTA_STATE_RECOVER_ERROR"
    template = (
        "The {operation} of your Delta table could not be recovered while Reconstructing "
        "version: {version}.{detail}"
    )

    def __init__(
        self,
        *,
        operation: object,
        version: object,
        checksum_file: object = None,
        detail: object = None,
    ) -> None:
        """``checksum_file``: the version checksum file the {operation} was first read from,
        when the log's replay found a different one (``detail`` is derived from it; a
        decoded error's is kept)."""
        if checksum_file is not None:
            detail = (
                f" The {operation} replayed from the log differs from the one in the version "
                f"checksum file {checksum_file}: one of the two is damaged or was copied from "
                "another table. Compare them with a backup of the table's _delta_log; the "
                "commits and checkpoints are the table's record, the checksum file an optional "
                "summary of them."
            )
        elif detail is None:
            detail = " Did you manually delete files in the _delta_log directory?"
        super().__init__(operation=operation, version=version, detail=detail)


class MissingCommitInfoError(DeltaError):
    error_class = "DELTA_MISSING_COMMIT_INFO"
    template = (
        "This table has the feature inCommitTimestamp enabled which requires the presence of "
        "the CommitInfo action in every commit. However, the CommitInfo action is missing from "
        "commit version {version} of {path}{detail}. Restore the commit file from a backup, or "
        "load another version."
    )

    def __init__(self, *, version: object, path: object, file_listed: bool = True) -> None:
        detail = "" if file_listed else " (its commit file is not in the log)"
        super().__init__(version=version, path=path, detail=detail)


class MissingCommitTimestampError(DeltaError):
    error_class = "DELTA_MISSING_COMMIT_TIMESTAMP"
    template = (
        "This table has the feature inCommitTimestamp enabled which requires the presence of "
        "commitTimestamp in the CommitInfo action. However, this field has not been set in "
        "commit version {version} of {path}: a writer that does not support in-commit "
        "timestamps wrote it. Load another version."
    )


class UnsupportedFeaturesForReadError(DeltaError):
    error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_READ"
    template = (
        'Unsupported Delta read feature: table "{path}" at version {version} requires reader '
        "table feature(s) that are unsupported by delta_connect_py: {features}. Use a reader "
        "that supports them."
    )


class UnsupportedFeaturesForWriteError(DeltaError):
    error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    template = (
        'Unsupported Delta write feature: table "{path}" at version {version} requires writer '
        "table feature(s) that are unsupported by delta_connect_py: {features}. It writes "
        "checkpoints and cleans up the log only where it honors every writer feature; use a "
        "writer that supports them."
    )


class FeaturesProtocolMetadataMismatchError(DeltaError):
    error_class = "DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH"
    template = (
        'Unable to operate on table "{path}" at version {version} because the following table '
        "features are enabled in metadata but not listed in protocol: {features}. The writer "
        "that set them did not add them to the protocol: have a Delta writer add the features "
        "to the protocol (or unset the properties), or read an earlier version."
    )


class InvalidProtocolVersionError(DeltaError):
    error_class = "DELTA_INVALID_PROTOCOL_VERSION"
    template = (
        'Unsupported Delta protocol version: table "{path}" at version {version} requires '
        "reader version {reader_required} and writer version {writer_required}, but "
        "delta_connect_py supports reader versions {supported_readers} and writer versions "
        "{supported_writers}. Read it with a reader that supports this protocol, or a newer "
        "release of delta_connect_py."
    )


class TimestampGreaterThanCommitError(DeltaError):
    error_class = "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"
    template = (
        "The provided timestamp ({provided_timestamp}) is after the latest version available "
        "to this table ({path}). Please use a timestamp before or at {maximum_timestamp}."
    )


class TimestampEarlierThanCommitRetentionError(DeltaError):
    error_class = "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION"
    template = (
        "The provided timestamp ({user_timestamp}) is before the earliest version available to "
        "this table ({path}) ({commit_timestamp}). Please use a timestamp after "
        "{commit_timestamp}."
    )


class InvalidTimestampError(DeltaError):
    error_class = "DELTA_TIMESTAMP_INVALID"
    template = (
        "The provided timestamp ('{timestamp!s}') cannot be converted to a valid timestamp. Use "
        "a datetime or a string Spark casts to a timestamp, like '2024-01-01 00:00:00' (in the "
        "session's time zone unless it names one)."
    )


class LogFileOutsideTableError(DeltaError):
    error_class = "DELTA_LOG_FILE_OUTSIDE_TABLE"
    template = (
        "Row read from {file} which is not a log file of {log_path}. The table path may contain "
        "glob characters the file system expanded; nothing was returned."
    )


class CorruptLogFileError(DeltaError):
    error_class = "DELTA_CORRUPT_LOG_FILE"
    template = (
        "The log file {file} of {path} could not be read: {reason}. Restore the file from a "
        "backup, or load a version the file is not needed for."
    )


def checkpoint_value_not_utf8(file: str, version: int, column: str | None) -> CorruptLogFileError:
    """``DELTA_CORRUPT_LOG_FILE`` for a ``file`` of the checkpoint of ``version`` whose
    ``column`` (None: unknown) holds a string that is not UTF-8."""
    where = "a value" if column is None else f"a value of its {column} column"
    return corrupt_checkpoint_file(file, version, f"{where} is not valid UTF-8")


def corrupt_checkpoint_file(file: str, version: int, reason: str) -> CorruptLogFileError:
    """``DELTA_CORRUPT_LOG_FILE`` for a ``file`` (a part or sidecar) of the checkpoint of
    ``version``, for ``reason``."""
    log_dir, separator, _ = file.rpartition("/_delta_log/")
    return CorruptLogFileError(
        file=file,
        path=(log_dir + "/_delta_log") if separator else file,
        reason=f"version {version}: {reason}",
    )


class ServerEnvironmentError(DeltaError):
    error_class = "DELTA_CONNECT_SERVER_ENVIRONMENT"
    template = "{message}"


class WorkerFileAccessError(DeltaError):
    error_class = "DELTA_CONNECT_WORKER_FILE_ACCESS"
    template = (
        "{operation} failed on {path}: the server's Python workers write, rename and delete "
        "these files themselves (Spark Connect cannot), with pyarrow and {source}, not with "
        "the server's Spark/Hadoop credentials, and the store refused or could not be "
        "reached ({reason}). Give the workers credentials: "
        "DeltaTable.for_path(spark, path, storage_options={{...}}) with {credentials} "
        "(delta-rs's names; they travel in the Spark plan, so prefer short-lived ones), or set "
        "them in the environment of the processes that start the server's Python workers."
    )


class UnsupportedFileSystemError(DeltaError):
    error_class = "DELTA_CONNECT_UNSUPPORTED_FILE_SYSTEM"
    template = (
        "{feature} needs the server's Python workers to open {path} themselves with pyarrow, "
        "which cannot open '{scheme}:' URIs ({reason}). Reading the table works; for this "
        "call, use a URI the workers can open (s3a://, abfss://, gs://, file:)."
    )


class InvalidStorageOptionsError(DeltaError):
    error_class = "DELTA_CONNECT_INVALID_STORAGE_OPTIONS"
    template = (
        "Unknown storage_options: {unknown}. Supported (delta-rs's names, for the server's "
        "Python workers' own file access): {supported}."
    )


class EmbeddedServerError(DeltaError):
    error_class = "DELTA_CONNECT_EMBEDDED_SERVER"
    template = "{message}"


class PythonVersionMismatchError(DeltaError):
    error_class = "DELTA_CONNECT_PYTHON_VERSION_MISMATCH"
    template = (
        "The Spark Connect server's Python workers run Python {server_version}, but this client "
        "runs Python {client_version}. delta_connect_py ships its worker code with cloudpickle, "
        "which needs the same minor version on both sides: point the server's PYSPARK_PYTHON at "
        "a Python {client_version} interpreter with pyarrow, or run the client on Python "
        "{server_version}."
    )


class UnsupportedServerVersionError(DeltaError):
    error_class = "DELTA_CONNECT_UNSUPPORTED_SERVER_VERSION"
    template = (
        "The Spark Connect server runs Spark {server_version}; delta_connect_py supports "
        "{supported} (this client has pyspark {client_version}). A 4.x client cannot run its "
        "worker code on an older server (the server unpickles it with an older cloudpickle) "
        "and needs Connect commands older servers lack (localCheckpoint): connect to a Spark "
        "4.0 or 4.1 Spark Connect server."
    )


class CheckpointNonExistTableError(DeltaError):
    error_class = "DELTA_CHECKPOINT_NON_EXIST_TABLE"
    template = (
        "Cannot checkpoint {path} at version {version}: no table version is negative (a "
        "checkpoint of version -1 is delta-spark's checkpoint of a table that does not exist). "
        "Checkpoint a version between 0 and the latest one, or None for the latest."
    )


class CheckpointSnapshotMismatchError(DeltaError):
    error_class = "DELTA_CHECKPOINT_SNAPSHOT_MISMATCH"
    template = (
        "State of the checkpoint doesn't match that of the snapshot. The checkpoint of version "
        "{version} of {path} holds {written} add actions but the snapshot has {expected}; "
        "nothing was published. Retry the checkpoint."
    )


class StorageFullError(DeltaError):
    error_class = "DELTA_CONNECT_STORAGE_FULL"
    template = (
        "{operation} on {path} ran out of space on the file system ({reason}). Nothing was "
        "published and the files written so far were removed; free space (or grow the volume) "
        "and run it again."
    )


class FailedCastPartitionValueError(DeltaError):
    error_class = "DELTA_FAILED_CAST_PARTITION_VALUE"
    template = (
        "Failed to cast partition value `{value}` to {data_type}: the log of {path} gives it as "
        "column {column} of the data file {file} (read at version {version}). The log holds a "
        "value the column's type cannot take: restore the commit that added the file, or read a "
        "version without it."
    )


class TimestampOutOfRangeError(DeltaError):
    error_class = "DELTA_CONNECT_TIMESTAMP_OUT_OF_RANGE"
    template = (
        "Version {version} of {path} has the commit timestamp {timestamp_ms} ms after the "
        "epoch, outside the years 1-9999 a Python datetime holds: the log gives it (an "
        "in-commit timestamp, else the commit file's modification time). Snapshot.timestamp_ms "
        "gives it as a number."
    )


class CheckpointUnsupportedError(DeltaError):
    error_class = "DELTA_CHECKPOINT_UNSUPPORTED"
    template = "Cannot write this checkpoint of {path}: {reason}"


class FileReferencedNotFoundError(DeltaError):
    error_class = "DELTA_FILE_NOT_FOUND_DETAILED"
    template = (
        "File {path} referenced in the transaction log of {table} cannot be found. This occurs "
        "when data files were deleted by hand (or by a vacuum with a short retention) rather than "
        "by a writer's delete. Restore the file, or read a version that does not reference it: "
        "DeltaTable.history() lists the versions, snapshot(version=...) reads one."
    )


class ReadTableWithoutColumnsError(DeltaError):
    error_class = "DELTA_READ_TABLE_WITHOUT_COLUMNS"
    template = (
        "You are trying to read the rows of Delta table {table} at version {version}, which does "
        "not have any columns (its metaData has no schemaString). A writer must first write data "
        "with a schema (delta-spark's `mergeSchema`, delta-rs's `schema_mode='merge'`); until "
        "then its state, files and history() can be read as they are."
    )


class PartitionColumnNotFoundError(DeltaError):
    error_class = "DELTA_PARTITION_COLUMN_NOT_FOUND"
    template = (
        "Partition column {column} not found in schema [{schema}] of Delta table {table} at "
        "version {version}: its metaData names a partition column its schema does not have, so "
        "its rows cannot be read nor a checkpoint written. Its state, files and history() can "
        "be read as they are; the writer that wrote this metaData must repair it."
    )


class DeletionVectorInvalidError(DeltaError):
    error_class = "DELTA_DELETION_VECTOR_INVALID"
    template = (
        "The deletion vector of data file {file} of {table} ({location}) could not be decoded: "
        "{reason}. Restore the deletion vector file, or read a version that does not use it."
    )


class MissingChangeDataError(DeltaError):
    error_class = "DELTA_MISSING_CHANGE_DATA"
    template = (
        "Error getting change data for range [{start} , {end}] as change data was not recorded "
        "for version [{version}]. If the change data feed was enabled later, find the version "
        "that enabled it (DeltaTable.history() shows each commit's operation, and "
        "snapshot(version=...).properties shows delta.enableChangeDataFeed) and start "
        "load_cdf there. To record change data from now on, have the table's writer set the "
        "table property delta.enableChangeDataFeed=true."
    )


class InvalidCdcRangeError(DeltaError):
    error_class = "DELTA_INVALID_CDC_RANGE"
    template = "CDC range from start {start} to end {end} was invalid. End cannot be before start."


class CdcStartVersionAfterLatestError(DeltaError):
    error_class = "DELTA_CDC_START_VERSION_AFTER_LATEST"
    template = (
        "Start version {start} for change data feed exceeds the latest table version {latest} "
        "of {path}. Start at or before version {latest}, or pass allow_out_of_range=True to get "
        "an empty result instead."
    )


class NoStartForCdcReadError(DeltaError):
    error_class = "DELTA_NO_START_FOR_CDC_READ"
    template = (
        "No starting version or timestamp provided for the change data feed of {path}. Pass "
        "load_cdf(starting_version=...) (0 reads the whole recorded history) or "
        "load_cdf(starting_timestamp=...)."
    )


class MissingFilesUnexpectedVersionError(DeltaError):
    """A commit the change feed needs is gone (delta-spark: a stream with failOnDataLoss)."""

    error_class = "DELTA_MISSING_FILES_UNEXPECTED_VERSION"
    template = (
        "Change data of {path} cannot be read from version {expected_version}: the transaction "
        "log continues at version {seen_version} (the commit files of versions {missing} were "
        "deleted by log retention or by hand), so the changes of those versions are lost. "
        "Start at or after version {seen_version}, and consider increasing "
        "delta.logRetentionDuration."
    )


class ChangeDataFeedSchemaError(DeltaError):
    """The range of a batch CDF read crosses a schema change its read schema cannot cover."""

    error_class = "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"


class ChangeDataFeedIncompatibleSchemaChangeError(ChangeDataFeedSchemaError):
    error_class = "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"
    template = (
        "Retrieving table changes of {path} between version {start} and {end} failed because of "
        "an incompatible schema change. Your read schema is {read_schema} at version "
        "{read_version}, but we found an incompatible schema change (a renamed or dropped "
        "column, a type or partitioning change) at version {incompatible_version}. If possible, "
        "please query table changes separately from version {start} to "
        "{incompatible_version} - 1, and from version {incompatible_version} to {end}."
    )


class ChangeDataFeedIncompatibleDataSchemaError(ChangeDataFeedSchemaError):
    error_class = "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"
    template = (
        "Retrieving table changes of {path} between version {start} and {end} failed because of "
        "an incompatible data schema. Your read schema is {read_schema} at version "
        "{read_version}, but we found an incompatible data schema at version "
        "{incompatible_version}. Read the changes from a later starting version, or up to a "
        "version before the schema change."
    )


class InvalidSourceOffsetError(DeltaError):
    """A streaming offset that cannot be parsed (root of the offset errors)."""

    error_class = "DELTA_INVALID_SOURCE_OFFSET_FORMAT"
    template = (
        "The stored source offset format is invalid: {offset} ({reason}). Pass an offset "
        "yielded by stream_cdf, or its to_json() text, unchanged."
    )


class InvalidSourceVersionError(InvalidSourceOffsetError):
    error_class = "DELTA_INVALID_SOURCE_VERSION"
    template = (
        "sourceVersion({version}) is invalid in the streaming offset {offset}: 1 and 3 are the "
        "versions delta-spark writes. Pass an offset yielded by stream_cdf."
    )


class InvalidFormatFromSourceVersionError(InvalidSourceOffsetError):
    error_class = "DELTA_INVALID_FORMAT_FROM_SOURCE_VERSION"
    template = (
        "Unsupported format. Expected version should be smaller than or equal to {expected} but "
        "was {version} in the streaming offset {offset}. The offset was written by a newer "
        "writer: resume with a release of delta_connect_py that reads it, or start the stream "
        "without an offset."
    )


class DifferentDeltaTableReadByStreamingSourceError(DeltaError):
    error_class = "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"
    template = (
        "The stream was reading from an unexpected Delta table {path} (id = '{new_table_id}'). "
        "Its offset {offset} belongs to another Delta table (id = '{old_table_id}'). This may "
        "happen when the table was deleted and re-created: start the stream from scratch (no "
        "offset) or pass an offset of this table."
    )


class TableReplacedDuringStreamError(DifferentDeltaTableReadByStreamingSourceError):
    """A version the stream reaches belongs to another table than the one it started on."""

    template = (
        "The stream of {path} reads the Delta table with id '{read_table_id}' (its version "
        "{read_version}, where the stream started), but version {version} belongs to another "
        "Delta table (id = '{table_id}'): the table was replaced or re-created. Read the "
        "versions before it with load_cdf, or start a new stream at or after the table's "
        "replacement."
    )


class StreamingIncompatibleSchemaChangeError(DeltaError):
    error_class = "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG"
    template = (
        "Streaming read of {path} is not supported across read-incompatible schema changes: "
        "version {version} and the stream's read schema (version {read_version}, where the "
        "stream started) differ by a renamed or dropped column or by the partition columns, "
        "under column mapping. Read the versions on each side of the change with load_cdf, or "
        "start a new stream at a version after it."
    )


class StreamSchemaChangedError(DeltaError):
    """A stream reaches a version whose data files its read schema cannot read."""

    error_class = "DELTA_SCHEMA_CHANGED_WITH_VERSION"
    template = (
        "Detected schema change in version {version} of {path}: the stream reads with the "
        "schema of version {read_version} (the latest when it started), {read_schema}, which "
        "cannot read the data files of version {version}, written with {data_schema} (a type "
        "or nullability change, or other partition columns). Read the versions up to the "
        "change with load_cdf, or start a new stream after version {version}."
    )


class StreamSchemaChangedWithStartingOptionsError(StreamSchemaChangedError):
    """:class:`StreamSchemaChangedError` of a stream given a ``starting_version``."""

    error_class = "DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS"


class InvalidArgumentError(DeltaError, ValueError):
    """An argument of a public call has a wrong value, found before any Spark job.

    Also a ``ValueError``, so code catching the built-in error keeps working.
    """

    error_class = "DELTA_CONNECT_INVALID_ARGUMENT"
    template = "{function}: {argument}={value} is not valid; expected {expected}."


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a public call has a wrong type (also a ``TypeError``)."""

    template = "{function}: {argument}={value} ({value_type}) is not valid; expected {expected}."


class ServerUnavailableError(DeltaError):
    """The Spark Connect server did not answer within the session's retry bound."""

    error_class = "SERVER_UNAVAILABLE"
    template = (
        "Cannot reach the Spark Connect server at {address}: no answer within {bound} of "
        "retries ({reason}). Check that the server is running and that the address and port "
        "are right (SPARK_REMOTE or connect(remote=...)); if it was restarted, call connect() "
        "again. connect(server_timeout=...) or DELTA_CONNECT_SERVER_TIMEOUT sets how long to "
        "retry."
    )


class SessionLostError(DeltaError):
    """The server no longer knows the session: it was restarted, or the session was closed."""

    error_class = "DELTA_CONNECT_SESSION_LOST"
    template = (
        "The Spark Connect session to {address} is gone ({reason}): the server was restarted or "
        "the session was stopped. Call connect() again and load the table again with "
        "DeltaTable.for_path(connect(), path); objects made from the old session cannot be used."
    )


class CastFailedError(DeltaError):
    """Spark could not cast a value (most often a ``to_df`` filter value of another type)."""

    error_class = "DELTA_CONNECT_CAST_FAILED"
    template = (
        "The server could not cast the value {value} of type {source_type} to {target_type}. "
        "If it is a to_df(filter=...) value, give a value of the column's type "
        "(snapshot.schema shows it)."
    )


class ServerFileSystemMissingError(DeltaError):
    """The server's Hadoop has no file system for a path's scheme."""

    error_class = "DELTA_CONNECT_SERVER_FILE_SYSTEM_MISSING"
    template = (
        "The Spark Connect server has no Hadoop file system for '{scheme}:' paths ({reason}). "
        "Add that file system's jars and settings to the server (for s3a: hadoop-aws and its "
        "AWS SDK, see the README's Object stores section), or use a path the server can read."
    )


class StorageAccessDeniedError(DeltaError):
    """The store refused a read or write: permissions, a read-only file system, AccessDenied."""

    error_class = "DELTA_CONNECT_ACCESS_DENIED"
    template = (
        "{path}: the store refused access ({reason}). Give the user the Spark Connect server and "
        "its Python workers run as the right to read and write the table's directory (a "
        "read-only mount or a missing permission cannot be written to), or read the table only."
    )


class ServerFileNotFoundError(DeltaError):
    """A file was gone when the server read it: deleted after it was listed."""

    error_class = "DELTA_CONNECT_FILE_NOT_FOUND"
    template = (
        "The file {file} was gone when the server read it ({reason}): another process "
        "deleted it after it was listed. Load the snapshot again (DeltaTable.snapshot()) and "
        "retry, or read a version that does not need it."
    )
