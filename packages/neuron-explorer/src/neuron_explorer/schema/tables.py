"""The profile's tables: every table and field, as the Parquet files hold them.

Table and field names follow Neuron Explorer's profile schema reference (schema 7.4.0,
``profile-schema-reference.rst``) wherever the real tool has the same notion; fields it does not
have are marked ``extension`` (the execution a row belongs to, the simulated core, dependency
details the simulator knows exactly). Timestamps are integer nanoseconds: device events on the
device's simulated clock (0 when the runtime was created), host events on the host clock relative
to the capture's start.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def F(name, type, description, unit="", required=True, extension=False) -> Field:
    return Field(name, type, description, unit, required, extension)


NS = "nanoseconds"
BYTES = "bytes"

_EXECUTION = (
    F("launch_id", "int64", "The device execution (ExecutionInfo.launch_id) this row belongs to.", extension=True),
    F("nc_idx", "int64", "Logical NeuronCore (the NEURON_RT_VISIBLE_CORES entry) that ran the execution."),
    F("pcore_idx", "int64", "Physical core within the logical core (0 for LNC=1)."),
)

INSTRUCTION = Table("Instruction", "timeline", "Instructions executed on NeuronCore compute engines and DMA triggers.", (
    F("id", "int64", "Unique identifier for this instruction execution."),
    *_EXECUTION,
    F("start_ts", "int64", "Timestamp when instruction started execution.", NS),
    F("end_ts", "int64", "Timestamp when instruction finished execution.", NS),
    F("duration_ns", "int64", "Duration of instruction execution.", NS),
    F("engine", "dictionary<string>", "Engine that executed this instruction: tensor, vector, scalar, gpsimd, sync, or dma."),
    F("timeline_track", "dictionary<string>", "Track the instruction is shown on: TensorE (LDWEIGHTS), TensorMatrix, Vector, Scalar, "
      "GpSimd, Sync, or the DMA queue name."),
    F("opcode", "dictionary<string>", "Opcode for the instruction. Example: MATMUL."),
    F("operands", "dictionary<string>", "Operands of the instruction, from the NEFF's program."),
    F("pc", "int64", "Index of the instruction in its program."),
    F("evt_wait_time_ns", "int64", "Time spent waiting for semaphores or data dependencies before starting.", NS),
    F("waited_on", "dictionary<string>", "What the wait was for: the producer's track (RAW/WAW), WAR, a semaphore name, or barrier; "
      "empty if it did not wait.", extension=True),
    F("hlo_name", "dictionary<string>", "Framework operation that launched the program (e.g. aten::mm).", required=False),
    F("nki_source_location", "dictionary<string>", "Source line (file:line) that emitted this instruction.", required=False),
    F("stack_frame_ids", "dictionary<string>", "Stack frames (StackFrame.id) of the source location, as a list.", required=False),
    F("framework_node_id", "int64", "FrameworkNode.id of the graph node this instruction belongs to.", extension=True),
    F("hbm_read_bytes", "int64", "Number of bytes read from HBM by this instruction.", BYTES),
    F("hbm_write_bytes", "int64", "Number of bytes written to HBM by this instruction.", BYTES),
    F("sbuf_read_bytes", "int64", "Number of bytes read from SBUF by this instruction.", BYTES),
    F("sbuf_write_bytes", "int64", "Number of bytes written to SBUF by this instruction.", BYTES),
    F("psum_read_bytes", "int64", "Number of bytes read from PSUM by this instruction.", BYTES),
    F("psum_write_bytes", "int64", "Number of bytes written to PSUM by this instruction.", BYTES),
    F("raw_flops", "int64", "Floating-point operations (2 per MAC) of this instruction."),
    F("adjusted_flops", "int64", "BF16-equivalent FLOPs (FP32 x4, FP8 x0.5 on Trn2/Trn3)."),
    F("flops_transpose", "int64", "FLOPs of TensorE transposes (a pass against an identity matrix)."),
    F("performance_mode", "dictionary<string>", "Performance mode (2x, 4x, throttled) or empty.", required=False),
))

DMA_PACKET = Table("DmaPacket", "timeline", "DMA transfers, one row per DMA instruction and engine group (aggregated packets).", (
    F("id", "int64", "Unique identifier for this DMA packet."),
    *_EXECUTION,
    F("instruction_id", "int64", "Instruction.id of the DMA instruction that triggered this transfer.", extension=True),
    F("pc", "int64", "Program index of the triggering instruction.", extension=True),
    F("start_ts", "int64", "Timestamp when the transfer started moving data.", NS),
    F("end_ts", "int64", "Timestamp when the transfer finished.", NS),
    F("duration_ns", "int64", "Duration of the transfer.", NS),
    F("engine_idx", "int64", "First DMA engine that served the transfer."),
    F("queue_name", "dictionary<string>", "Queue the DMA was issued on. Example: qSyncIO0."),
    F("transfer_bytes", "int64", "Bytes moved.", BYTES),
    F("read_bytes", "int64", "Bytes read from the source.", BYTES),
    F("write_bytes", "int64", "Bytes written to the destination.", BYTES),
    F("throughput", "float64", "transfer_bytes / duration.", "bytes_per_second"),
    F("source", "dictionary<string>", "Source: an HBM tensor name or SBUF."),
    F("dest", "dictionary<string>", "Destination: an HBM tensor name or SBUF."),
    F("variable", "dictionary<string>", "The HBM tensor the transfer reads or writes, if any.", required=False),
))

SEMAPHORE_UPDATE = Table("SemaphoreUpdate", "timeline", "Semaphore increments used for synchronization.", (
    *_EXECUTION,
    F("timestamp", "int64", "Timestamp when the semaphore update occurred.", NS),
    F("id", "dictionary<string>", "The semaphore updated (a named semaphore or a DMA queue's completion semaphore)."),
    F("value", "int32", "Value of the semaphore after the update."),
    F("update_source", "dictionary<string>", "What incremented it: an engine track or DMA."),
    F("pc", "int64", "Program index of the instruction that updated it.", extension=True),
    F("instruction_id", "int64", "Instruction.id of that instruction.", extension=True),
))

ACTIVE_TIME = Table("ActiveTime", "timeline", "Merged busy intervals of each engine (and of the DMA engines) per execution.", (
    *_EXECUTION,
    F("start_ts", "int64", "Timestamp when activity on this engine starts.", NS),
    F("end_ts", "int64", "Timestamp when activity on this engine ends.", NS),
    F("duration_ns", "int64", "The duration of the active time period.", NS),
    F("engine", "dictionary<string>", "tensor, vector, scalar, gpsimd, sync or dma."),
))

HBM_USAGE = Table("HbmUsage", "time series", "HBM throughput of the DMA transfers that read or write HBM, at every change.", (
    *_EXECUTION,
    F("timestamp", "int64", "Timestamp of this sample.", NS),
    F("current_throughput", "float64", "HBM transfer rate from this timestamp on.", "bytes_per_second"),
    F("total_transfer_bytes", "int64", "HBM bytes this NeuronCore transferred since the start of the profile, at this "
      "timestamp.", BYTES),
))

SBUF_USAGE = Table("SbufUsage", "time series", "State Buffer fullness per partition quadrant, at every change: a block is "
                   "occupied from the first instruction that writes it to the last that accesses it.", (
    *_EXECUTION,
    F("timestamp", "int64", "Timestamp of this sample.", NS),
    F("avg_util_percent", "float64", "Average fullness across all partitions.", "percent"),
    *(F(f"partition_{p}_util_percent", "float64", f"Fullness of partitions {p}-{p + 31}.", "percent") for p in (0, 32, 64, 96)),
))

PSUM_USAGE = Table("PsumUsage", "time series", "PSUM fullness per bank, at every change (occupancy as in SbufUsage).", (
    *_EXECUTION,
    F("timestamp", "int64", "Timestamp of this sample.", NS),
    F("avg_util_percent", "float64", "Average fullness across all PSUM banks.", "percent"),
    *(F(f"bank_{b}_util_percent", "float64", f"Fullness of PSUM bank {b}.", "percent") for b in range(8)),
))

FLOW = Table("Flow", "edges", "Dependencies between rows of timeline tables: the waited-for producer (in) and the waiting "
             "consumer (out).", (
    F("in_id", "int64", "id of the producer row (in in_table)."),
    F("out_id", "int64", "id of the consumer row (in out_table)."),
    F("in_table", "dictionary<string>", "Table of the producer: Instruction, SemaphoreUpdate, SystemProfileEvents."),
    F("out_table", "dictionary<string>", "Table of the consumer: Instruction, DmaPacket, SystemProfileEvents."),
    F("dependency_type", "dictionary<string>", "FLOW_DEPENDENCE (data read after write), ANTI_DEPENDENCE (write after read), "
      "SEMAPHORE, DMA_TRIGGER, LAUNCH (runtime call to device execution), QUEUE_ORDER."),
    F("gap_time", "int64", "Time between the end of the producer and the start of the consumer.", NS),
))

FRAMEWORK_NODE = Table("FrameworkNode", "hierarchy", "Framework operations (level op) and the device programs they launched "
                       "(level graph), with rolled-up device statistics.", (
    F("id", "int64", "Unique identifier of this node.", extension=True),
    F("level", "string", "op (a framework operation) or graph (a program it launched).", extension=True),
    F("node_name", "string", "Name of this node: the op (aten::mm) or the program name."),
    F("parent_name", "string", "Name of the parent node (empty for ops)."),
    F("parent_id", "int64", "id of the parent node (null for ops).", required=False, extension=True),
    F("children_names", "string", "Child node names, as a list."),
    F("children_ids", "string", "Child node ids, as a list."),
    F("launch_count", "int64", "Device executions of this node.", extension=True),
    F("device_time_ns", "int64", "Total device time of its executions.", NS, extension=True),
    F("start_ts", "int64", "Earliest start among its executions.", NS),
    F("end_ts", "int64", "Latest end among its executions.", NS),
    F("time_intervals", "string", "Merged [start, end] intervals of its executions."),
    F("mfu", "float64", "Model FLOPs utilization over its device time.", "percent"),
    F("hfu", "float64", "Hardware FLOPs utilization (transposes included) over its device time.", "percent"),
    F("mbu", "float64", "HBM bandwidth utilization over its device time.", "percent", extension=True),
    F("mfu_per_interval", "string", "MFU of each interval of time_intervals, as a list."),
    F("hfu_per_interval", "string", "HFU of each interval of time_intervals, as a list."),
    F("mbu_per_interval", "string", "MBU of each interval of time_intervals, as a list."),
    F("model_flops", "int64", "Matmul FLOPs of its instructions.", extension=True),
    F("hardware_flops", "int64", "All TensorE FLOPs of its instructions (transposes included).", extension=True),
    F("hbm_read_bytes", "int64", "Bytes read from HBM by its instructions.", BYTES),
    F("hbm_write_bytes", "int64", "Bytes written to HBM by its instructions.", BYTES),
    F("sbuf_read_bytes", "int64", "Bytes read from SBUF by its instructions.", BYTES),
    F("sbuf_write_bytes", "int64", "Bytes written to SBUF by its instructions.", BYTES),
    *(F(f"{e}_engine_instruction_count", "int64", f"Instructions executed by the {e.capitalize()} engine.")
      for e in ("tensor", "vector", "scalar", "gpsimd", "sync")),
    *(F(f"total_time_{e}", "string", f"[min, max] timestamp of its {e.capitalize()} engine instructions, [] if none.", NS)
      for e in ("tensor", "vector", "scalar", "gpsimd", "sync")),
    *(F(f"active_time_{e}_ns", "int64", f"Time the {e.capitalize()} engine was busy with its instructions.", NS, extension=True)
      for e in ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")),
))

_ENGINE_SUMMARY = tuple(
    field
    for e in ("tensor", "vector", "scalar", "gpsimd", "sync")
    for field in (
        F(f"{e}_engine_instruction_count", "int64", f"Number of {e.capitalize()} engine instructions."),
        F(f"{e}_engine_instruction_time", "float64", f"Total duration of {e.capitalize()} engine instructions, added up.", "seconds"),
        F(f"{e}_engine_active_time", "float64", f"Time the {e.capitalize()} engine processes at least one instruction.", "seconds"),
        F(f"{e}_engine_active_time_percent", "float64", f"{e.capitalize()} engine active time / total_time.", "percent"),
    )
)

SUMMARY = Table("Summary", "summary", "Performance metrics of each device execution (scope execution) and of the whole "
                "profile (scope profile: sums over executions; percentages over their total device time).", (
    F("scope", "string", "execution or profile.", extension=True),
    F("launch_id", "int64", "The execution summarized (null for the profile row).", required=False, extension=True),
    F("nc_idx", "int64", "Its NeuronCore (null for the profile row).", required=False, extension=True),
    F("total_time", "float64", "Device execution time (the executions' durations added up).", "seconds"),
    F("neuroncore_cycle_count", "int64", "total_time in NeuronCore base-clock cycles.", "cycles"),
    F("instruction_count", "int64", "Instructions executed.", extension=True),
    F("model_flops", "int64", "Matmul FLOPs (2 per MAC), transposes excluded.", "flops"),
    F("hardware_flops", "int64", "All TensorE FLOPs, transposes included.", "flops"),
    F("transpose_flops", "int64", "FLOPs of TensorE transposes.", "flops"),
    F("adjusted_hardware_flops", "int64", "BF16-equivalent hardware FLOPs.", "flops"),
    F("mfu_estimated_percent", "float64", "model_flops / (TensorE BF16 peak x total_time).", "percent"),
    F("hfu_estimated_percent", "float64", "hardware_flops / (TensorE BF16 peak x total_time).", "percent"),
    F("mbu_estimated_percent", "float64", "(hbm_read_bytes + hbm_write_bytes) / total_time / HBM bandwidth of a core.", "percent"),
    F("mm_arithmetic_intensity", "float64", "(hardware_flops - transpose_flops) / HBM bytes."),
    F("peak_flops_bandwidth_ratio", "float64", "TensorE peak FLOP/s over peak HBM bytes/s."),
    F("hbm_read_bytes", "int64", "Bytes read from HBM.", BYTES),
    F("hbm_write_bytes", "int64", "Bytes written to HBM.", BYTES),
    F("sbuf_read_bytes", "int64", "Bytes read from SBUF.", BYTES),
    F("sbuf_write_bytes", "int64", "Bytes written to SBUF.", BYTES),
    F("psum_read_bytes", "int64", "Bytes read from PSUM.", BYTES),
    F("psum_write_bytes", "int64", "Bytes written to PSUM.", BYTES),
    F("dma_transfer_count", "int64", "Number of DMA transfers."),
    F("dma_transfer_total_bytes", "int64", "Bytes moved by DMA transfers.", BYTES),
    F("dma_transfer_average_bytes", "float64", "dma_transfer_total_bytes / dma_transfer_count.", BYTES),
    F("dma_active_time", "float64", "Time at least one DMA transfer is moving data.", "seconds"),
    F("dma_active_time_percent", "float64", "dma_active_time / total_time.", "percent"),
    F("matmul_instruction_count", "int64", "MATMUL instructions."),
    *_ENGINE_SUMMARY,
    F("total_active_time", "float64", "Time at least one engine or DMA transfer is active.", "seconds"),
    F("total_active_time_percent", "float64", "total_active_time / total_time.", "percent"),
))

OPCODE_SUMMARY = Table("OpcodeSummary", "summary", "Instruction counts and time per (engine, opcode) over the profile.", (
    F("engine", "string", "Engine that executed the instructions."),
    F("opcode", "string", "Opcode of the instructions."),
    F("instruction_count", "int64", "Instructions with this engine and opcode."),
    F("instruction_time_ns", "int64", "Their durations added up.", NS),
    F("active_time_ns", "int64", "Time at least one of them is executing (overlaps merged, per execution).", NS),
    F("active_time_percent", "float64", "active_time_ns / total device time.", "percent"),
))

TENSOR_INFO = Table("TensorInfo", "lookup", "The HBM tensors of each NEFF in the profile, and how often they were loaded "
                    "into SBUF.", (
    F("neff_name", "string", "The NEFF (ExecutionInfo.neff_name).", extension=True),
    F("variable_name", "string", "The name of the tensor."),
    F("type", "string", "IN, OUT, INOUT or INTERNAL."),
    F("shape", "string", "The tensor's shape."),
    F("dtype", "string", "Element type.", extension=True),
    F("size", "int64", "Size in bytes.", BYTES),
    F("load_to_sbuf_dma_count", "int64", "DMA transfers loading it into SBUF in one execution."),
    F("load_to_sbuf_total_size_bytes", "int64", "Bytes of those transfers.", BYTES),
    F("load_to_sbuf_avg_size_bytes", "int64", "Average bytes per transfer.", BYTES),
    F("load_to_sbuf_repeat_factor", "float64", "Times the tensor was loaded (total bytes / size)."),
))

STACK_FRAME = Table("StackFrame", "lookup", "Stack frames instructions map back to.", (
    F("id", "string", "Unique identifier (one-based)."),
    F("file_location_id", "int32", "StackFrameFileLocation.id."),
    F("parent_frame_id", "string", "Parent frame, or 0 for a root frame."),
))
STACK_FRAME_FILE_LOCATION = Table("StackFrameFileLocation", "lookup", "File, function and line of stack frames.", (
    F("id", "string", "Unique identifier (one-based)."),
    F("file_name_id", "int32", "StackFrameFileName.id."),
    F("function_name_id", "int32", "StackFrameFunctionName.id."),
    F("line_number", "int32", "Line number within the file."),
))
STACK_FRAME_FILE_NAME = Table("StackFrameFileName", "lookup", "Source file names of stack frames.", (
    F("id", "string", "Unique identifier (one-based)."),
    F("name", "string", "Source file path."),
    F("captured", "bool", "Whether the profile holds a copy of the file (sources/).", extension=True),
))
STACK_FRAME_FUNCTION_NAME = Table("StackFrameFunctionName", "lookup", "Function names of stack frames.", (
    F("id", "string", "Unique identifier (one-based)."),
    F("name", "string", "Function name (empty when only file:line is known)."),
))

METADATA = Table("Metadata", "metadata", "The profile, the capture and the simulated NeuronCore.", (
    F("profile_schema_version", "string", "Version of this schema (MAJOR.MINOR.PATCH)."),
    F("explorer_version", "string", "neuron-explorer version that processed the profile."),
    F("runtime_version", "string", "neuron-sim version that captured it."),
    F("profile_name", "string", "User chosen name for this profile."),
    F("is_simulation", "bool", "Always true: the device is the software NeuronCore."),
    F("target", "string", "Simulated platform target (trn2, trn3).", extension=True),
    F("instance_type", "string", "Host the capture ran on.", required=False),
    F("process_id", "int64", "Process that was profiled.", extension=True),
    F("num_physical_cores", "int32", "Physical cores per logical core."),
    F("vnc_enabled", "bool", "Whether logical cores span several physical cores."),
    F("first_hw_timestamp", "int64", "First device timestamp in the profile.", NS),
    F("last_hw_timestamp", "int64", "Last device timestamp in the profile.", NS),
    F("first_ts", "string", "Wall-clock time the capture started (UTC)."),
    F("last_ts", "string", "Wall-clock time the capture stopped (UTC)."),
    F("hbm_ddr_bandwidth", "float64", "Peak HBM bandwidth one core draws on.", "bytes_per_second"),
    F("dma_ddr_bandwidth", "float64", "Practical bandwidth of all DMA engines of a core.", "bytes_per_second"),
    F("num_dma_engines_per_neuroncore", "int32", "DMA engines per core."),
    F("tensor_engine_num_rows", "int64", "Rows of the PE array."),
    F("tensor_engine_num_cols", "int64", "Columns of the PE array."),
    F("tensor_engine_clock_freq", "float64", "TensorE clock.", "gigahertz"),
    F("vector_engine_clock_freq", "float64", "VectorE clock.", "gigahertz"),
    F("scalar_engine_clock_freq", "float64", "ScalarE clock.", "gigahertz"),
    F("gpsimd_engine_clock_freq", "float64", "GpSimd clock.", "gigahertz"),
    F("neuroncore_clock_freq", "float64", "NeuronCore base clock.", "gigahertz"),
    F("ticks_per_nanosec", "int64", "Timestamp ticks per nanosecond (1)."),
    F("session_dir", "string", "The capture session this profile was ingested from.", extension=True),
    F("session_fingerprint", "string", "Identity of the session files ingested (re-ingest when they change).", extension=True),
    F("device_profile", "string", "Device profile mode of the capture: 0, model or session.", extension=True),
))

EXECUTION_INFO = Table("ExecutionInfo", "metadata", "Every task the runtime ran: device executions of NEFFs and host tasks.", (
    F("execution_index", "int32", "Zero-based index of this execution within the profile."),
    F("launch_id", "int64", "The runtime's launch id (unique per process).", extension=True),
    F("neff_name", "string", "File name of the NEFF (under neffs/), null for host tasks.", required=False),
    F("execution_start_ts", "int64", "Start on the device timeline.", NS),
    F("execution_end_ts", "int64", "End on the device timeline.", NS),
    F("nc_idx", "int64", "Logical NeuronCore.", extension=True),
    F("device", "int64", "The runtime's device index (neuron:<device>).", extension=True),
    F("queue", "string", "The queue (stream) it ran on.", extension=True),
    F("kind", "string", "neff for program launches; host, copy, ... for other tasks.", extension=True),
    F("name", "string", "The framework operation or task name.", extension=True),
    F("context", "string", "The caller's description (op and shapes).", required=False, extension=True),
    F("executor", "string", "Executor mode that ran it (exact, fast), empty for host tasks.", extension=True),
    F("host_start_ns", "int64", "Host clock when the task started running, from the capture's start.", NS, extension=True),
    F("host_end_ns", "int64", "Host clock when it finished.", NS, extension=True),
    F("thread_id", "int64", "Host thread that ran it.", extension=True),
    F("device_profiled", "bool", "Whether its instructions are in the device tables.", extension=True),
    F("error", "string", "The task's error, if it failed.", required=False, extension=True),
    F("framework_node_id", "int64", "FrameworkNode.id of its graph node (null for host tasks).", required=False, extension=True),
    F("row_count", "int64", "Instruction rows of this execution."),
))

SYSTEM_PROFILE_EVENTS = Table("SystemProfileEvents", "timeline", "Runtime (host) and hardware (device) events.", (
    F("id", "int64", "Unique identifier for this event."),
    F("name", "string", "Name of the event: nc_exec_running, nrt_execute, the host task or copy."),
    F("start_ts", "int64", "Timestamp when event started (device clock for neuron_hw, host clock for neuron_rt).", NS),
    F("end_ts", "int64", "Timestamp when event finished.", NS),
    F("duration_ns", "int64", "Duration of this event.", NS),
    F("trace_event_source", "string", "neuron_rt (the runtime, on the host), neuron_hw (the device) or framework."),
    F("instance_id", "string", "Host that produced this event."),
    F("process_id", "int64", "Process that produced this event."),
    F("thread_id", "int64", "Thread that produced this event (the queue's worker for device events)."),
    F("nc_idx", "int64", "Logical NeuronCore of the event.", required=False),
    F("worker_gid", "int64", "Global worker id of the NeuronCore.", required=False),
    F("launch_id", "int64", "The execution (ExecutionInfo.launch_id).", required=False, extension=True),
    F("event_type", "string", "The event type the capture filters on (nc_exec_running, nrt_execute, ...).", extension=True),
    F("flow_id", "list<string>", "Flow ids linking this event to events of other sources.", required=False),
    F("framework_stream_id", "string", "The queue (stream) of the event.", required=False),
    F("extra_attributes_json", "string", "Attributes without a column of their own, as JSON.", required=False),
))

CPU_USAGE = Table("CpuUsage", "time series", "Host CPU utilization samples, per CPU core and averaged.", (
    F("timestamp", "int64", "Host clock of this sample, from the capture's start.", NS),
    F("util_percent", "float64", "Utilization over the interval before this sample.", "percent"),
    F("cpu_id", "string", "The CPU core, or average for all cores."),
    F("instance_id", "string", "Host the sample was taken on."),
))

HOST_MEM_USAGE = Table("HostMemUsage", "time series", "Host memory samples.", (
    F("timestamp", "int64", "Host clock of this sample, from the capture's start.", NS),
    F("used_bytes", "int64", "Host memory in use (total - available).", BYTES),
    F("used_percent", "float64", "used_bytes / total.", "percent"),
    F("instance_id", "string", "Host the sample was taken on."),
))

WARNING = Table("Warning", "diagnostics", "Warnings produced while capturing or processing the profile.", (
    F("message", "string", "What is missing or unexpected."),
    F("category", "string", "Missing Data, Dropped Events, ..."),
))

SCHEMA_FIELDS = Table("SchemaFields", "metadata", "Every field of every table, as this schema defines it.", (
    F("table_name", "string", "The table this field belongs to."),
    F("table_description", "string", "The description of that table."),
    F("field_name", "string", "The name of this field."),
    F("field_description", "string", "The description of this field."),
    F("field_type", "string", "Its type."),
    F("field_required", "bool", "Whether every row has a value."),
    F("field_unit", "string", "Its unit.", required=False),
    F("field_extension", "bool", "Whether the field is ours rather than Neuron Explorer's."),
))

TABLES: dict[str, Table] = {t.name: t for t in (
    INSTRUCTION, DMA_PACKET, SEMAPHORE_UPDATE, ACTIVE_TIME, HBM_USAGE, SBUF_USAGE, PSUM_USAGE, FLOW, FRAMEWORK_NODE, SUMMARY, OPCODE_SUMMARY,
    TENSOR_INFO, STACK_FRAME, STACK_FRAME_FILE_LOCATION, STACK_FRAME_FILE_NAME, STACK_FRAME_FUNCTION_NAME, METADATA,
    EXECUTION_INFO, SYSTEM_PROFILE_EVENTS, CPU_USAGE, HOST_MEM_USAGE, WARNING, SCHEMA_FIELDS,
)}
