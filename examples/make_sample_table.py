"""Write the small sample Delta table that ``make demo`` describes (``examples/sample_table``).

Responsibility: one reproducible recipe, run once with delta-rs (``deltalake``, in the ``test``
extra) and its output committed, so that a fresh clone can run the demo with nothing beside it.

The table: partitioned by ``region``, change data feed on, and a history that exercises the
replay: appends, a delete (remove actions and change data), an update, a checkpoint, and one
commit after the checkpoint. delta-rs writes no deletion vectors. Time travel by timestamp uses
the commit files' modification times, which a clone sets to the checkout time.

    .venv-thin/bin/python examples/make_sample_table.py examples/sample_table --force
"""

from __future__ import annotations

import argparse
import shutil
import sys
from datetime import date
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("region", pa.string()),
        ("item", pa.string()),
        ("quantity", pa.int32()),
        ("price", pa.float64()),
        ("order_date", pa.date32()),
    ]
)

PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
}


def orders(first_id: int, rows: list[tuple[str, str, int, float, int]]) -> pa.Table:
    """Rows of (region, item, quantity, price, day of November 2026) numbered from first_id."""
    return pa.table(
        {
            "order_id": list(range(first_id, first_id + len(rows))),
            "region": [r[0] for r in rows],
            "item": [r[1] for r in rows],
            "quantity": [r[2] for r in rows],
            "price": [r[3] for r in rows],
            "order_date": [date(2026, 11, r[4]) for r in rows],
        },
        schema=SCHEMA,
    )


def write_sample(path: Path) -> None:
    # version 0: the table, two regions
    write_deltalake(
        str(path),
        orders(
            1,
            [
                ("eu", "apple", 3, 0.5, 1),
                ("eu", "pear", 1, 0.8, 1),
                ("us", "apple", 10, 0.45, 2),
                ("us", "plum", 4, 1.2, 2),
            ],
        ),
        partition_by=["region"],
        configuration=PROPERTIES,
        name="orders",
        description="Sample orders for the delta_connect_py demo",
    )
    # version 1: an append that adds a region
    write_deltalake(
        str(path),
        orders(5, [("apac", "mango", 2, 2.5, 3), ("eu", "apple", 5, 0.5, 3)]),
        mode="append",
    )
    table = DeltaTable(str(path))
    # version 2: a delete (rewrites a file: remove + add, and change data)
    table.delete("item = 'pear'")
    # version 3: an update
    table.update(predicate="region = 'us' AND item = 'plum'", updates={"price": "1.1"})
    # version 4: another append, then a checkpoint of version 4
    write_deltalake(
        str(path),
        orders(7, [("us", "pear", 7, 0.75, 4), ("apac", "apple", 1, 0.6, 4)]),
        mode="append",
    )
    DeltaTable(str(path)).create_checkpoint()
    # version 5: one commit after the checkpoint
    write_deltalake(str(path), orders(9, [("eu", "plum", 2, 1.3, 5)]), mode="append")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--force", action="store_true", help="replace an existing table")
    args = parser.parse_args(argv)
    if args.path.exists():
        if not args.force:
            parser.error(f"{args.path} exists (pass --force to replace it)")
        shutil.rmtree(args.path)
    write_sample(args.path)
    table = DeltaTable(str(args.path))
    print(f"{args.path}: version {table.version()}, {len(table.file_uris())} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
