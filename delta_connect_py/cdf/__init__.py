"""The change data feed as Spark Connect DataFrames: batch reads, file changes and a stream.

Modules: :mod:`~delta_connect_py.cdf.commits` (a range's commits and their actions),
:mod:`~delta_connect_py.cdf.checks` (what a range must satisfy), :mod:`~delta_connect_py.cdf.rows`
(the changed rows DataFrame), :mod:`~delta_connect_py.cdf.batch` (``load_cdf``),
:mod:`~delta_connect_py.cdf.file_changes` (file changes after an offset, within admission limits)
and :mod:`~delta_connect_py.cdf.stream` (``stream_cdf``).

Responsibility: delta-spark's ``CDCReader.changesToDF`` (:func:`load_cdf`), its streaming
source's ``getFileChangesForCDC`` (:func:`cdf_file_changes`) and micro-batch loop
(:func:`stream_cdf`), built from the pure rules in :mod:`delta_connect_py.protocol.cdf` and
:mod:`delta_connect_py.protocol.schema_changes`.

How rows are made: the file actions of the versions in range are collected once (one small job
over the commit JSON: cdc/add/remove/commitInfo/metaData/protocol, stats dropped; metadata-sized,
never table rows). Every data file named (cdc files, and add/remove files of versions without
cdc files) is read by ONE ``spark.read.parquet`` over explicit paths with the read schema's
physical columns (``delta.columnMapping.physicalName``; the names themselves without column
mapping; matched by parquet field id in mode ``id``, see ``data.parquet_read_schema``) plus
``_change_type``; each row is tagged by a broadcast join on its decoded
``_metadata.file_path`` with a small client-built frame of (file, change type, version,
timestamp, partition values), so a file named by several versions yields its rows once per
version. cdc files keep their own ``_change_type``; add files are ``insert``, removes
``delete``. Partition values come from ``partitionValues`` (keyed by physical name) cast to the
schema's types; physical columns are renamed to logical ones last (``delta_connect_py.data``).

Invariants:
* result schema = read schema (logical names, no field metadata) + ``_change_type string,
  _commit_version long, _commit_timestamp timestamp``. The batch read schema is delta-spark's:
  the end version's schema when column mapping is on at the start, end or latest version
  (``endVersion`` mode), else the latest version's schema (``legacy`` mode);
* a batch range whose metadata changes are not read-compatible with the read schema (a renamed
  or dropped column, a type, nullability or partitioning change) raises
  ``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE`` (``..._DATA_SCHEMA`` when the start
  version's own schema is the incompatible one), never wrong rows;
* ``_commit_timestamp`` is the commit's ``inCommitTimestamp`` when it has one, else the commit
  file's modification time monotonized over versions ``start - 100 .. end`` (delta-spark's rule;
  delta-rs uses ``commitInfo.timestamp`` instead, so the two differ there);
* every version in a batch range has CDF enabled (start snapshot and every ``metaData`` in
  range), else ``DELTA_MISSING_CHANGE_DATA``; the start version can be rebuilt (else the
  snapshot's error) and every later commit in range is present, else
  ``DELTA_MISSING_FILES_UNEXPECTED_VERSION`` (delta-spark's batch reader skips missing commits
  silently; we refuse, as its streams do);
* a range is read only where this library can read the protocol: every protocol action in a
  batch range and the protocol in force at its start, and every protocol action in the commits a
  stream batch reaches, pass delta-spark's ``protocolRead`` check, else
  ``DELTA_UNSUPPORTED_FEATURES_FOR_READ`` (or ``DELTA_INVALID_PROTOCOL_VERSION``) names the
  version;
* streams read each batch with the metadata in effect at the batch's start (delta-spark's
  schema tracking): a commit whose metadata changes the schema, partitioning or ``delta.*``
  configuration gets a ``METADATA_CHANGE_INDEX`` barrier that ends the batch, and the next
  batch reads with the new metadata. Unlike delta-spark, the stream then goes on by itself (no
  restart, no ``POST_METADATA_CHANGE_INDEX`` offset), and protocol-only changes make no barrier;
* deletion vectors: an add (remove) with a DV contributes the rows outside its DV; a path both
  removed and added in one version with a DV on either side contributes only the difference
  (rows in the new DV but not the old as ``delete``, the reverse as ``insert``), like
  delta-spark's ``processDeletionVectorActions``. DV files are read by Spark and decoded
  on the server (:mod:`delta_connect_py.plans.deletion_vectors`) and applied with joins on
  ``_metadata.row_index``.
"""

from delta_connect_py.cdf.batch import load_cdf
from delta_connect_py.cdf.commits import commit_timestamps_ms, read_commit_changes
from delta_connect_py.cdf.file_changes import FileChanges, cdf_file_changes
from delta_connect_py.cdf.rows import (
    CDF_COLUMNS,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    cdf_schema,
    changes_frame,
)
from delta_connect_py.cdf.stream import CdfBatch, batch_frame, stream_cdf

__all__ = [
    "CDF_COLUMNS",
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "CdfBatch",
    "FileChanges",
    "batch_frame",
    "cdf_file_changes",
    "cdf_schema",
    "changes_frame",
    "commit_timestamps_ms",
    "load_cdf",
    "read_commit_changes",
    "stream_cdf",
]
