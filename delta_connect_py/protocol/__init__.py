"""The pure Delta protocol layer: log file names, ``_last_checkpoint``, table properties, reader
features, log segment choice, path keys, commit timestamps and a reference log replay.

Responsibility: every decision about the Delta log that can be made from file listings, small
JSON documents and plain Python values, without a Spark session. The DataFrame plans and the
server-side workers build on these functions, and the unit tests use :mod:`.replay` as the
oracle for the distributed replay.

Invariants: modules here import only the standard library, pyarrow and
:mod:`delta_connect_py.errors`; they never import pyspark, never touch a file system and never
read the clock (callers pass "now"-derived values in). Errors the user can act on are raised as
:class:`delta_connect_py.errors.DeltaError` subclasses.
"""
