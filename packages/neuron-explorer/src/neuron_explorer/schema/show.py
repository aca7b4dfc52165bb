"""The schema as text (``neuron-explorer --show-profile-schema``) and as the SchemaFields table."""

from __future__ import annotations

import json

import pyarrow as pa

from .tables import SCHEMA_FIELDS, TABLES
from .version import SCHEMA_VERSION


def describe_schema(fmt: str = "yaml") -> str:
    """Every table and field: ``yaml`` (readable; valid YAML) or ``json``."""
    doc = {
        "profile_schema_version": SCHEMA_VERSION,
        "tables": {
            t.name: {
                "kind": t.kind,
                "description": t.description,
                "fields": {
                    f.name: {k: v for k, v in (("type", f.type), ("unit", f.unit), ("required", f.required),
                                                ("extension", f.extension), ("description", f.description)) if v != ""}
                    for f in t.fields
                },
            }
            for t in TABLES.values()
        },
    }
    if fmt == "json":
        return json.dumps(doc, indent=2)
    if fmt != "yaml":
        raise ValueError(f"schema format must be yaml or json, got {fmt!r}")
    lines = [f"profile_schema_version: {json.dumps(SCHEMA_VERSION)}", "tables:"]
    for name, table in doc["tables"].items():
        lines += [f"  {name}:", f"    kind: {json.dumps(table['kind'])}", f"    description: {json.dumps(table['description'])}",
                  "    fields:"]
        for fname, spec in table["fields"].items():
            lines.append(f"      {fname}:")
            lines += [f"        {k}: {json.dumps(v)}" for k, v in spec.items()]
    return "\n".join(lines) + "\n"


def schema_fields_table() -> pa.Table:
    rows = [
        {"table_name": t.name, "table_description": t.description, "field_name": f.name, "field_description": f.description,
         "field_type": f.type, "field_required": f.required, "field_unit": f.unit or None, "field_extension": f.extension}
        for t in TABLES.values() for f in t.fields
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA_FIELDS.arrow_schema)
