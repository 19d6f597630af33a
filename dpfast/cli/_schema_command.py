"""``dpfast schema init``: write a schema skeleton from a data file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpfast.cli._inputs import read_input
from dpfast.cli._parsing import Command, column_list, delimiter
from dpfast.exceptions import DPFastValueError

_INIT_EXAMPLES = """\
examples:
  dpfast schema init people.csv -o people.schema.json
  dpfast schema init people.parquet                       # print the skeleton

Every column gets the type its file type suggests. Numeric columns get a placeholder for
their PUBLIC bounds, and the release commands refuse the schema until you replace each
placeholder with [lower, upper] from a codebook or other public knowledge. Text columns
are written unprotected: add a "taxonomy" (a list of the public values, a nested mapping,
or an ARX hierarchy file) to protect them.

--bounds-from-data and --domains-from-data fill in the data's own minimum and maximum, or
its observed values, instead. They are marked "from_data" in the file, and a release that
uses them warns and reports itself as NOT differentially private: for trying things out.
"""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", metavar="DATA", help="the data file (.parquet or .csv)")
    parser.add_argument("-o", "--output", metavar="SCHEMA", help="write here (default: print)")
    parser.add_argument(
        "--bounds-from-data",
        action="store_true",
        help="fill numeric bounds with the data's min and max (NOT private; marked)",
    )
    parser.add_argument(
        "--domains-from-data",
        action="store_true",
        help="list text columns' observed values as their taxonomy (NOT private; marked)",
    )
    parser.add_argument(
        "--unprotected",
        type=column_list,
        default=[],
        help="columns to write as not protected (e.g. identifiers), comma-separated",
    )
    parser.add_argument(
        "--delimiter", metavar="CHAR", type=delimiter, help="field separator of a CSV input"
    )
    parser.add_argument("--encoding", metavar="NAME", help="text encoding of a CSV input")
    parser.add_argument("--force", action="store_true", help="overwrite an existing SCHEMA")


def skeleton(table: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Return the schema skeleton of ``table`` (an Arrow table) as a JSON-ready mapping."""
    from dpfast.io import column_kinds
    from dpfast.schema import PLACEHOLDER

    unknown = sorted(set(args.unprotected) - set(table.column_names))
    if unknown:
        from dpfast._validation import quoted

        raise DPFastValueError(f"--unprotected names {quoted(unknown)}, which DATA does not have")
    columns: dict[str, Any] = {}
    for name, kind, missing in column_kinds(table):
        entry: dict[str, Any] = {"type": kind}
        protect = name not in args.unprotected and kind != "string"
        if kind in ("integer", "float") and protect:
            if args.bounds_from_data and missing < table.num_rows:
                values = table.column(name).to_numpy(zero_copy_only=False)
                low, high = _min_max(values, kind)
                entry["bounds"] = [low, high]
                entry["from_data"] = ["bounds"]
            else:
                entry["bounds"] = f"{PLACEHOLDER}: [lower, upper] from public knowledge"
        elif kind == "categorical" and protect and args.domains_from_data:
            values = table.column(name).drop_null().unique().to_pylist()
            entry["taxonomy"] = sorted(str(v) for v in values)
            entry["from_data"] = ["taxonomy"]
        elif kind == "categorical":
            entry["protect"] = False
            entry["description"] = 'add a "taxonomy" of its public values to protect it'
        else:
            entry["protect"] = False
        if missing and entry.get("protect", True):
            entry["description"] = (
                f"{missing} missing value(s): impute them with a public rule before a "
                "release, or set protect to false"
            )
        columns[name] = entry
    return {"version": 1, "columns": columns}


def _min_max(values: Any, kind: str) -> tuple[Any, Any]:
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    low, high = float(values.min()), float(values.max())
    if kind == "integer":
        return int(low), int(high)
    return low, high


def _init(args: argparse.Namespace) -> int:
    from dpfast.io import write_json_atomic

    if args.output is not None and Path(args.output).exists() and not args.force:
        raise DPFastValueError(f"{args.output} exists; pass --force to overwrite it")
    args.input = args.data
    table = read_input(args)
    result = skeleton(table, args)
    if args.output is None:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    write_json_atomic(result, args.output)
    placeholders = sum(isinstance(entry.get("bounds"), str) for entry in result["columns"].values())
    marked = [name for name, entry in result["columns"].items() if "from_data" in entry]
    print(f"wrote {args.output}: {len(result['columns'])} columns")
    if placeholders:
        print(f"  fill in the public bounds of {placeholders} column(s) before a release")
    if marked:
        print(f"  taken from the data (a release using them is NOT private): {', '.join(marked)}")
    return 0


#: ``dpfast schema``'s commands.
COMMANDS = (
    Command(
        "init",
        help="write a schema skeleton from a data file",
        description="Write a schema skeleton (JSON) from a data file: every column with "
        "its type, and placeholders for the public bounds.",
        epilog=_INIT_EXAMPLES,
        arguments=_arguments,
        handler=_init,
    ),
)
