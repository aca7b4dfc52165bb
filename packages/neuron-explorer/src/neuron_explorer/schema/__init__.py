"""The profile schema: tables, fields, versions; ``describe_schema`` prints it."""

from .show import describe_schema, schema_fields_table
from .tables import TABLES, Field, Table
from .version import SCHEMA_VERSION, SESSION_FORMAT_VERSION, check_readable

__all__ = ["TABLES", "Field", "Table", "SCHEMA_VERSION", "SESSION_FORMAT_VERSION", "check_readable", "describe_schema",
           "schema_fields_table"]
