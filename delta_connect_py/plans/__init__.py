"""Client-side plans: Spark Connect DataFrames built from protocol values.

No storage I/O on the client, no per-row Python on the client, and nothing proportional to the
table is collected to the client (only log listings, protocol, metadata and aggregates).
"""
