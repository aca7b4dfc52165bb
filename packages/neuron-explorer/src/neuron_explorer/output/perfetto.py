"""Perfetto's native trace format (``.pftrace``): TrackDescriptor and TrackEvent packets built with the
``perfetto`` package's trace protos, streamed to the file one packet at a time."""

from __future__ import annotations

from pathlib import Path

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

from .events import TraceEvent
from .lanes import Lanes

SEQUENCE_ID = 1


class PerfettoTraceWriter:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._file = open(self.path, "wb")
        self._builder = StreamingTraceProtoBuilder(self._file)
        self._groups: dict[str, int] = {}
        self._tracks: dict[tuple[str, str], int] = {}
        self._lanes = Lanes()
        self._uuids = 0
        self.events = 0

    def _next_uuid(self) -> int:
        self._uuids += 1
        return self._uuids

    def _uuid(self, group: str, track: str) -> int:
        parent = self._groups.get(group)
        if parent is None:
            parent = self._groups[group] = self._next_uuid()
            packet = self._builder.create_packet()
            packet.track_descriptor.uuid = parent
            packet.track_descriptor.name = group
            self._builder.write_packet(packet)
        uuid = self._tracks.get((group, track))
        if uuid is None:
            uuid = self._tracks[(group, track)] = self._next_uuid()
            packet = self._builder.create_packet()
            packet.track_descriptor.uuid = uuid
            packet.track_descriptor.parent_uuid = parent
            packet.track_descriptor.name = track
            self._builder.write_packet(packet)
        return uuid

    def add(self, event: TraceEvent) -> None:
        track = self._lanes.place(event.group, event.track, event.start_ns, event.end_ns)
        uuid = self._uuid(event.group, track)
        begin = self._builder.create_packet()
        begin.timestamp = event.start_ns
        begin.trusted_packet_sequence_id = SEQUENCE_ID
        te = begin.track_event
        te.type = TrackEvent.TYPE_SLICE_BEGIN
        te.track_uuid = uuid
        te.name = event.name
        for key, value in event.args.items():
            annotation = te.debug_annotations.add()
            annotation.name = key
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                annotation.string_value = str(value)
            elif isinstance(value, int):
                annotation.int_value = value
            else:
                annotation.double_value = value
        te.flow_ids.extend(event.flows_out)
        te.terminating_flow_ids.extend(event.flows_in)
        self._builder.write_packet(begin)
        end = self._builder.create_packet()
        end.timestamp = max(event.end_ns, event.start_ns)
        end.trusted_packet_sequence_id = SEQUENCE_ID
        end.track_event.type = TrackEvent.TYPE_SLICE_END
        end.track_event.track_uuid = uuid
        self._builder.write_packet(end)
        self.events += 1

    def close(self) -> None:
        self._file.close()
