"""Streaming the profile tables to Parquet: column chunks are buffered and written a row group at a time,
so a table of any length needs memory for one row group only."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ProfileFormatError
from ..schema.tables import Table
from ..schema.version import SCHEMA_VERSION

SCHEMA_VERSION_KEY = b"neuron_explorer.profile_schema_version"
TABLE_KEY = b"neuron_explorer.table"
ROW_GROUP_ROWS = 1 << 17
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 1
# How columns are encoded decides most of the cost of writing (4x between the defaults and this, for
# the Instruction table): ids and timestamps (near-monotonic integers) as deltas, floats plain,
# everything else dictionary-encoded (opcodes, tracks, operands repeat across executions).
DELTA_COLUMNS = frozenset({"id", "start_ts", "end_ts", "timestamp", "in_id", "out_id", "instruction_id", "execution_start_ts",
                           "execution_end_ts", "host_start_ns", "host_end_ns", "total_transfer_bytes"})
NO_STATISTICS = frozenset({"operands", "nki_source_location", "stack_frame_ids", "context", "extra_attributes_json",
                           "time_intervals", "mfu_per_interval", "hfu_per_interval", "mbu_per_interval", "message"})


def _encodings(schema: pa.Schema) -> dict:
    delta = [f.name for f in schema if f.name in DELTA_COLUMNS and pa.types.is_integer(f.type)]
    dictionary = [f.name for f in schema if f.name not in delta and not pa.types.is_floating(f.type)]
    return {"use_dictionary": dictionary, "column_encoding": {name: "DELTA_BINARY_PACKED" for name in delta},
            "write_statistics": [f.name for f in schema if f.name not in NO_STATISTICS]}


# Encoding a row group (which Arrow does without the GIL) overlaps with building the next one: row
# groups go to a small pool of writer threads, in order per file, at most a few in flight at once
# (memory stays bounded by them).
_WRITERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="neuron-explorer parquet")
_IN_FLIGHT = threading.BoundedSemaphore(4)


def open_parquet(path: Path, what: str, missing: str) -> pq.ParquetFile:
    """A Parquet file opened for reading; a missing, corrupt or foreign file is a ProfileFormatError
    naming it (``what`` says what the file is, ``missing`` what to do when it is not there)."""
    try:
        return pq.ParquetFile(path)
    except FileNotFoundError:
        raise ProfileFormatError(f"{what} {path} is missing: {missing}") from None
    except (pa.ArrowException, OSError) as err:
        raise ProfileFormatError(f"{what} {path} is corrupt, truncated or not Parquet: {err}") from None


class TableWriter:
    """Appends column chunks (numpy arrays, Arrow arrays, or ``constant(value, n)``) to one table's file."""

    def __init__(self, directory: Path, table: Table, row_group_rows: int = ROW_GROUP_ROWS):
        self.table = table
        self.path = Path(directory) / f"{table.name}.parquet"
        metadata = {SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode(), TABLE_KEY: table.name.encode()}
        self.schema = table.arrow_schema.with_metadata(metadata)
        self._writer = pq.ParquetWriter(self.path, self.schema, compression=COMPRESSION, compression_level=COMPRESSION_LEVEL,
                                        **_encodings(self.schema))
        self._chunks: dict[str, list] = {name: [] for name in table.field_names}
        self._buffered = 0
        self.rows = 0
        self._row_group_rows = row_group_rows
        self._last: Future | None = None  # the row group being written

    def append(self, n: int, **columns) -> None:
        if n == 0:
            return
        missing = set(self._chunks) - set(columns)
        if missing:
            raise KeyError(f"{self.table.name}: chunk lacks columns {sorted(missing)}")
        for f in self.schema:
            value = columns[f.name]
            if isinstance(value, constant) and value.value is not None and (pa.types.is_integer(f.type) or
                                                                              pa.types.is_floating(f.type)):
                value = np.full(n, value.value, dtype=f.type.to_pandas_dtype())
            self._chunks[f.name].append(value)
        self._buffered += n
        self.rows += n
        if self._buffered >= self._row_group_rows:
            self.flush()

    def append_rows(self, rows: list[dict]) -> None:
        if rows:
            batch = pa.Table.from_pylist(rows, schema=self.table.arrow_schema)
            self.append(len(rows), **{name: batch.column(name).combine_chunks() for name in self._chunks})

    def flush(self) -> None:
        if not self._buffered:
            return
        arrays = [_concat(self._chunks[f.name], f.type, self._buffered) for f in self.schema]
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        for chunks in self._chunks.values():
            chunks.clear()
        self._buffered = 0
        _IN_FLIGHT.acquire()
        self._last = _WRITERS.submit(self._write, self._last, table)

    def _write(self, previous: Future | None, table: pa.Table) -> None:
        try:
            if previous is not None:
                previous.result()  # row groups in order; an earlier failure fails this one too
            self._writer.write_table(table, row_group_size=self._row_group_rows)
        finally:
            _IN_FLIGHT.release()

    def close(self) -> None:
        try:
            self.flush()
            if self._last is not None:
                self._last.result()
        finally:
            self._writer.close()


class constant:
    """A column chunk of ``n`` copies of ``value``."""

    __slots__ = ("value", "n")

    def __init__(self, value, n: int):
        self.value, self.n = value, n


def _concat(chunks: list, arrow_type: pa.DataType, total: int) -> pa.Array:
    if all(isinstance(c, np.ndarray) for c in chunks) and not _is_text(arrow_type):
        return pa.array(np.concatenate(chunks) if len(chunks) > 1 else chunks[0], type=arrow_type)
    arrays = [_chunk_array(c, arrow_type) for c in chunks]
    if pa.types.is_dictionary(arrow_type):
        result = pa.chunked_array(arrays, type=arrow_type).unify_dictionaries().combine_chunks()
    else:
        result = pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
    if len(result) != total:
        raise ValueError(f"column chunks hold {len(result)} rows, expected {total}")
    return result


def _is_text(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_dictionary(arrow_type) or pa.types.is_list(arrow_type)


def _chunk_array(chunk, arrow_type: pa.DataType) -> pa.Array:
    if isinstance(chunk, constant):
        if pa.types.is_dictionary(arrow_type):
            dictionary = pa.array([] if chunk.value is None else [chunk.value], arrow_type.value_type)
            indices = np.full(chunk.n, 0, np.int32) if chunk.value is not None else None
            if indices is None:
                return pa.DictionaryArray.from_arrays(pa.nulls(chunk.n, pa.int32()), dictionary)
            return pa.DictionaryArray.from_arrays(pa.array(indices), dictionary)
        if chunk.value is None or chunk.n < 64:
            return pa.array([chunk.value] * chunk.n, type=arrow_type)
        return pa.repeat(pa.scalar(chunk.value, type=arrow_type), chunk.n)
    if isinstance(chunk, pa.ChunkedArray):
        chunk = chunk.combine_chunks()
    if not isinstance(chunk, pa.Array):
        chunk = pa.array(chunk, type=arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type)
    if pa.types.is_dictionary(arrow_type):
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        if chunk.type.index_type != arrow_type.index_type:
            chunk = pa.DictionaryArray.from_arrays(chunk.indices.cast(arrow_type.index_type), chunk.dictionary)
        return chunk
    if pa.types.is_dictionary(chunk.type):
        chunk = chunk.dictionary_decode()
    return chunk if chunk.type == arrow_type else chunk.cast(arrow_type)
