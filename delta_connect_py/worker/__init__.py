"""Server-side code: the bodies Spark Connect runs in its Python workers.

Everything here imports only the standard library, pyarrow and ``delta_connect_py.protocol``;
it reaches the server pickled by value (see ``delta_connect_py.session``), so the server never
needs delta_connect_py installed. Functions are module-level and configured with frozen
dataclasses of primitives; their side effects are idempotent under task retry.
"""
