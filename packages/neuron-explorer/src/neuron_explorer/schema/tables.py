"""The profile's tables: every table and field, as the Parquet files hold them.

The definitions are data, in ``tables.toml`` next to this module (names, types, units and
descriptions after Neuron Explorer's profile schema reference); this module reads them once into
``Table`` and ``Field`` objects and checks them, so a bad definition fails at import naming the
table and field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources

import pyarrow as pa

ARROW_TYPES = {
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "string": pa.string(),
    # Strings that repeat row after row (opcodes, tracks, operands of a program run many times):
    # stored dictionary-encoded; they read back as a dictionary column with the same string values.
    "dictionary<string>": pa.dictionary(pa.int32(), pa.string()),
    "bool": pa.bool_(),
    "list<string>": pa.list_(pa.string()),
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    description: str
    unit: str = ""
    required: bool = True
    extension: bool = False  # not in Neuron Explorer's schema: ours


@dataclass(frozen=True)
class Table:
    name: str
    kind: str  # timeline | time series | edges | hierarchy | summary | lookup | metadata | diagnostics
    description: str
    fields: tuple[Field, ...]

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(f.name, ARROW_TYPES[f.type], nullable=not f.required) for f in self.fields])

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


_ATTRIBUTES = {"unit", "required", "extension"}


def _field(table: str, spec) -> Field:
    if not isinstance(spec, list) or len(spec) not in (3, 4) or not all(isinstance(s, str) for s in spec[:3]):
        raise ValueError(f"schema table {table}: a field is [name, type, description, {{attributes}}], got {spec!r}")
    name, type_, description = spec[:3]
    attributes = spec[3] if len(spec) == 4 else {}
    unknown = set(attributes) - _ATTRIBUTES
    if unknown:
        raise ValueError(f"schema field {table}.{name}: unknown attribute(s) {sorted(unknown)}; known: {sorted(_ATTRIBUTES)}")
    if type_ not in ARROW_TYPES:
        raise ValueError(f"schema field {table}.{name}: unknown type {type_!r}; one of {sorted(ARROW_TYPES)}")
    return Field(name, type_, description, **attributes)


def _tables(doc: dict) -> dict[str, Table]:
    groups = {name: tuple(_field(f"[groups] {name}", f) for f in specs) for name, specs in doc["groups"].items()}
    tables = {}
    for name, spec in doc["tables"].items():
        fields: list[Field] = []
        for entry in spec["fields"]:
            if isinstance(entry, str):
                if entry not in groups:
                    raise ValueError(f"schema table {name}: no field group {entry!r}; groups: {sorted(groups)}")
                fields += groups[entry]
            else:
                fields.append(_field(name, entry))
        names = [f.name for f in fields]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"schema table {name}: field(s) {repeated} defined more than once")
        tables[name] = Table(name, spec["kind"], spec["description"], tuple(fields))
    return tables


TABLES: dict[str, Table] = _tables(tomllib.loads(resources.files(__package__).joinpath("tables.toml").read_text("utf-8")))
SCHEMA_FIELDS = TABLES["SchemaFields"]
