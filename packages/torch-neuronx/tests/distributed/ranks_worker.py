"""One rank of a multi-process test (run by conftest.run_ranks, not collected by pytest).

    python ranks_worker.py <scenario> <scratch dir>      # RANK / WORLD_SIZE / MASTER_* in the env

Each scenario sets up its process group(s), runs its cases and prints one ``RESULT <json>``
line; the test asserts on every rank's result. A failed case is collected, not raised, so one
run reports all of them (and every rank keeps calling the same collectives in the same order).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch_neuronx  # noqa: F401  (registers the neuron device and backend)
from torch_neuronx import execution
from torch_neuronx.distributed import collective_ns

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
SCRATCH = sys.argv[2] if len(sys.argv) > 2 else "."
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("RANKS_PG_TIMEOUT", "180")))
NEURON = torch.device("neuron", 0)
DTYPES = [torch.float32, torch.bfloat16, torch.int64]


def init(backend: str | None, store: str | None = "store") -> None:
    """A process group on a FileStore in the scratch dir (``store``), or env:// (None)."""
    if store is None:
        dist.init_process_group(backend, timeout=TIMEOUT)
    else:
        dist.init_process_group(backend, init_method=f"file://{os.path.join(SCRATCH, store)}", rank=RANK,
                                world_size=WORLD, timeout=TIMEOUT)


class Cases:
    """Named checks: each runs on neuron and on CPU tensors through the same group (CPU tensors
    go to gloo unchanged: the gloo-on-CPU reference) and both are compared to the value every
    rank can compute on its own."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: dict[str, str] = {}

    def check(self, name: str, fn) -> None:
        if os.environ.get("RANKS_TRACE"):
            print(f"rank {RANK}: {name}", file=sys.stderr, flush=True)
        try:
            fn()
        except Exception:  # a failed case is reported, the others still run
            self.failed[name] = traceback.format_exc(limit=6)
            if os.environ.get("RANKS_TRACE"):
                print(self.failed[name], file=sys.stderr, flush=True)
        else:
            self.passed.append(name)

    def result(self) -> dict:
        return {"passed": self.passed, "failed": self.failed}


def data(rank: int, n: int, dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Rank ``rank``'s input: small integers (exact in bfloat16), different on every rank."""
    return ((torch.arange(n) * (3 + salt) + rank * 5 + salt) % 7 + 1).to(dtype)


def equal(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.dtype} {list(got.shape)} {got.flatten()[:12].tolist()}, "
                             f"want {want.dtype} {list(want.shape)} {want.flatten()[:12].tolist()}")


def on_both(fn, want: torch.Tensor | list, what: str) -> None:
    """``fn(device)`` returns its result(s); neuron and CPU must each equal ``want``. Both run
    before anything is compared, so every rank issues the same collectives."""
    wants = want if isinstance(want, list) else [want]
    results = {device: fn(device) for device in (NEURON, torch.device("cpu"))}
    for device, got in results.items():
        gots = got if isinstance(got, list) else [got]
        assert len(gots) == len(wants), f"{what} on {device}: {len(gots)} results, want {len(wants)}"
        for i, (g, w) in enumerate(zip(gots, wants)):
            equal(g, w, f"{what} on {device} [{i}]")


def on(device: torch.device, t: torch.Tensor) -> torch.Tensor:
    """A copy of CPU tensor ``t`` on ``device`` (``.to("cpu")`` alone would alias ``t``)."""
    return t.to(device, copy=True)


# ------------------------------------------------------------------------------------------------
# scenario: every collective on neuron vs gloo-CPU, for each dtype


def _reduce_ops(dtype):
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
           "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
    if not dtype.is_floating_point:
        ops.update(BAND=dist.ReduceOp.BAND, BOR=dist.ReduceOp.BOR, BXOR=dist.ReduceOp.BXOR)
    return ops


def _reduced(op: str, stack: torch.Tensor) -> torch.Tensor:
    if op == "SUM":
        return stack.sum(0, dtype=stack.dtype)
    if op == "PRODUCT":
        return stack.prod(0, dtype=stack.dtype)
    if op == "MIN":
        return stack.min(0).values
    if op == "MAX":
        return stack.max(0).values
    if op == "AVG":
        total = stack.sum(0, dtype=stack.dtype)
        return total / WORLD if stack.dtype.is_floating_point else torch.div(total, WORLD, rounding_mode="trunc")
    out = stack[0].clone()
    for row in stack[1:]:
        out = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op](out, row)
    return out


def _collectives_for(cases: Cases, dtype: torch.dtype) -> None:
    d = str(dtype).replace("torch.", "")
    n = 8
    everyone = torch.stack([data(r, n, dtype) for r in range(WORLD)])
    mine = everyone[RANK]

    for op_name, op in _reduce_ops(dtype).items():
        def all_reduce(device, op=op):
            t = on(device, mine)
            dist.all_reduce(t, op=op)
            return t
        cases.check(f"all_reduce {op_name} {d}", lambda f=all_reduce, o=op_name: on_both(f, _reduced(o, everyone), f"all_reduce {o}"))

    def broadcast(device):
        t = on(device, mine)
        dist.broadcast(t, src=1)
        return t
    cases.check(f"broadcast {d}", lambda: on_both(broadcast, everyone[1], "broadcast"))

    def reduce(device):
        t = on(device, mine)
        dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
        return t if RANK == 0 else t.new_zeros(0).cpu()  # the non-root result is unspecified
    cases.check(f"reduce {d}", lambda: on_both(reduce, _reduced("MAX", everyone) if RANK == 0 else mine.new_zeros(0), "reduce"))

    def all_gather(device):
        outs = [torch.zeros(n, dtype=dtype, device=device) for _ in range(WORLD)]
        dist.all_gather(outs, on(device, mine))
        return outs
    cases.check(f"all_gather {d}", lambda: on_both(all_gather, list(everyone), "all_gather"))

    def all_gather_into_tensor(device):
        out = torch.zeros(WORLD * n, dtype=dtype, device=device)
        dist.all_gather_into_tensor(out, on(device, mine))
        return out
    cases.check(f"all_gather_into_tensor {d}", lambda: on_both(all_gather_into_tensor, everyone.flatten(), "all_gather_into_tensor"))

    summed = everyone.sum(0, dtype=dtype)

    def reduce_scatter(device):
        out = torch.zeros(n // WORLD, dtype=dtype, device=device)
        dist.reduce_scatter(out, list(on(device, mine).chunk(WORLD)))
        return out
    cases.check(f"reduce_scatter {d}", lambda: on_both(reduce_scatter, summed.chunk(WORLD)[RANK], "reduce_scatter"))

    def reduce_scatter_tensor(device):
        out = torch.zeros(n // WORLD, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out, on(device, mine))
        return out
    cases.check(f"reduce_scatter_tensor {d}", lambda: on_both(reduce_scatter_tensor, summed.chunk(WORLD)[RANK], "reduce_scatter_tensor"))

    def reduce_scatter_tensor_avg(device):
        out = torch.zeros(n // WORLD, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out, on(device, mine), op=dist.ReduceOp.AVG)
        return out
    cases.check(f"reduce_scatter_tensor AVG {d}",
                lambda: on_both(reduce_scatter_tensor_avg, _reduced("AVG", everyone).chunk(WORLD)[RANK], "reduce_scatter_tensor AVG"))

    # all_to_all: rank r's chunk j goes to rank j, arriving as chunk r
    chunk = n // WORLD
    a2a_want = torch.cat([everyone[r].chunk(WORLD)[RANK] for r in range(WORLD)])

    def all_to_all(device):
        outs = [torch.zeros(chunk, dtype=dtype, device=device) for _ in range(WORLD)]
        dist.all_to_all(outs, list(on(device, mine).chunk(WORLD)))
        return torch.cat([o.cpu() for o in outs])
    cases.check(f"all_to_all {d}", lambda: on_both(all_to_all, a2a_want, "all_to_all"))

    def all_to_all_single(device):
        out = torch.zeros(n, dtype=dtype, device=device)
        dist.all_to_all_single(out, on(device, mine))
        return out
    cases.check(f"all_to_all_single {d}", lambda: on_both(all_to_all_single, a2a_want, "all_to_all_single"))

    # uneven splits: rank r sends (j + 1 + r) elements to rank j
    def splits(src):
        return [j + 1 + src for j in range(WORLD)]

    uneven_inputs = [data(r, sum(splits(r)), dtype, salt=1) for r in range(WORLD)]
    uneven_want = torch.cat([uneven_inputs[r].split(splits(r))[RANK] for r in range(WORLD)])

    def all_to_all_uneven(device):
        out = torch.zeros(len(uneven_want), dtype=dtype, device=device)
        dist.all_to_all_single(out, on(device, uneven_inputs[RANK]), output_split_sizes=[RANK + 1 + r for r in range(WORLD)],
                               input_split_sizes=splits(RANK))
        return out
    cases.check(f"all_to_all_single uneven {d}", lambda: on_both(all_to_all_uneven, uneven_want, "all_to_all_single uneven"))

    def gather(device):
        outs = [torch.zeros(n, dtype=dtype, device=device) for _ in range(WORLD)] if RANK == 0 else None
        dist.gather(on(device, mine), outs, dst=0)
        return outs if RANK == 0 else []
    cases.check(f"gather {d}", lambda: on_both(gather, list(everyone) if RANK == 0 else [], "gather"))

    def scatter(device):
        out = torch.zeros(n, dtype=dtype, device=device)
        dist.scatter(out, [on(device, everyone[r]) for r in range(WORLD)] if RANK == 0 else None, src=0)
        return out
    cases.check(f"scatter {d}", lambda: on_both(scatter, everyone[RANK], "scatter"))

    peer = (RANK + 1) % WORLD
    from_peer = everyone[(RANK - 1) % WORLD]

    def send_recv(device):
        out = torch.zeros(n, dtype=dtype, device=device)
        if RANK % 2 == 0:
            dist.send(on(device, mine), dst=peer)
            dist.recv(out, src=(RANK - 1) % WORLD)
        else:
            dist.recv(out, src=(RANK - 1) % WORLD)
            dist.send(on(device, mine), dst=peer)
        return out
    cases.check(f"send/recv {d}", lambda: on_both(send_recv, from_peer, "send/recv"))

    def recv_any_source(device):
        out = torch.zeros(n, dtype=dtype, device=device)
        if RANK == 0:
            dist.send(on(device, mine), dst=1)
            return [everyone[1]]  # rank 0 only sends
        sender = dist.recv(out)  # src=None: from whoever sends
        assert sender == 0, f"recv from any source reported sender {sender}"
        return [out]
    cases.check(f"recv any source {d}", lambda: on_both(recv_any_source, everyone[0] if RANK == 1 else everyone[1],
                                                         "recv any source"))

    def isend_irecv(device):
        out = torch.zeros(n, dtype=dtype, device=device)
        works = [dist.isend(on(device, mine), dst=peer), dist.irecv(out, src=(RANK - 1) % WORLD)]
        for w in works:
            w.wait()
        return out
    cases.check(f"isend/irecv {d}", lambda: on_both(isend_irecv, from_peer, "isend/irecv"))

    def batch(device):
        out = torch.zeros(n, dtype=dtype, device=device)
        ops = [dist.P2POp(dist.irecv, out, (RANK - 1) % WORLD), dist.P2POp(dist.isend, on(device, mine), peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return out
    cases.check(f"batch_isend_irecv {d}", lambda: on_both(batch, from_peer, "batch_isend_irecv"))

    def async_all_reduce(device):
        t = on(device, mine)
        work = dist.all_reduce(t, async_op=True)
        value = work.get_future().wait()
        assert work.wait() is True and work.is_completed()
        assert isinstance(value, list) and value[0] is t, f"future value {value!r} is not [the reduced tensor]"
        return t
    cases.check(f"all_reduce async_op {d}", lambda: on_both(async_all_reduce, summed, "all_reduce async"))

    def functional(device):
        t = on(device, mine)
        reduced = fc.all_reduce(t, "sum", dist.group.WORLD)
        gathered = fc.all_gather_tensor(t, 0, dist.group.WORLD)
        scattered = fc.reduce_scatter_tensor(t, "sum", 0, dist.group.WORLD)
        exchanged = fc.all_to_all_single(t, None, None, dist.group.WORLD)
        return [fc.wait_tensor(x) for x in (reduced, gathered, scattered, exchanged)]
    cases.check(f"functional collectives {d}",
                lambda: on_both(functional, [summed, everyone.flatten(), summed.chunk(WORLD)[RANK], a2a_want], "functional"))


def scenario_collectives() -> dict:
    init("neuron")
    cases = Cases()
    for dtype in DTYPES:
        _collectives_for(cases, dtype)
    _stream_order(cases)
    _groups_and_objects(cases)
    _layout(cases)
    dist.destroy_process_group()
    return cases.result()


def _stream_order(cases: Cases) -> None:
    everyone = torch.stack([data(r, 64, torch.float32) for r in range(WORLD)])
    summed = everyone.sum(0)

    def ordered():
        # the input is computed by device work that may still be queued at the call; after
        # wait(), work on the stream sees the result
        t = on(NEURON, everyone[RANK]) * 1.0
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        equal(t * 2.0, summed * 2.0, "an op after wait() of an async all_reduce")
    cases.check("stream order", ordered)

    def modelled_time():
        # rank 1's stream is 50 us of simulated work further when it reaches the all_reduce:
        # both ranks start it at the latest arrival and end together, the model's time later
        t = on(NEURON, everyone[RANK])
        q = execution.queue(NEURON)
        if RANK == 1:
            execution.submit_host(None, device=NEURON, device_time_ns=50_000.0, name="busy", kind="host", context="busy",
                                  framework="test")
        q.synchronize()
        arrival = q.sim_time_ns
        dist.all_reduce(t)
        end = q.sim_time_ns
        arch = execution.runtime().device(0).arch.name
        model = collective_ns("all_reduce", t.numel() * 4, WORLD, arch_name=arch)
        times = [None] * WORLD
        dist.all_gather_object(times, (arrival, end))
        latest = max(a for a, _ in times)
        assert model > 0 and times[0][0] != times[1][0], times  # the ranks did arrive at different times
        for rank, (a, e) in enumerate(times):
            assert abs(e - (latest + model)) < 1e-3, f"rank {rank}: arrived {a}, ended {e}; latest arrival {latest} + model {model}"
    cases.check("all_reduce takes the modelled device time", modelled_time)

    def coalesced():
        a, b = on(NEURON, everyone[RANK]), on(NEURON, everyone[RANK][:8] * 1.0)
        with dist._coalescing_manager(device=NEURON, async_ops=True) as cm:
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
        equal(a, summed, "all_reduce coalesced [0]")
        equal(b, summed[:8], "all_reduce coalesced [1]")
        outs = [torch.zeros(WORLD * 64, device=NEURON), torch.zeros(WORLD * 8, device=NEURON)]
        with dist._coalescing_manager(device=NEURON):
            dist.all_gather_into_tensor(outs[0], on(NEURON, everyone[RANK]))
            dist.all_gather_into_tensor(outs[1], on(NEURON, everyone[RANK][:8]))
        equal(outs[0], everyone.flatten(), "all_gather_into_tensor coalesced [0]")
        equal(outs[1], everyone[:, :8].flatten(), "all_gather_into_tensor coalesced [1]")
    cases.check("coalescing manager", coalesced)

    def barrier():
        dist.barrier()
        dist.barrier(device_ids=[0])
    cases.check("barrier", barrier)


def _groups_and_objects(cases: Cases) -> None:
    pair = dist.new_group(list(range(WORLD)))
    alone = dist.new_group([WORLD - 1])

    def sub_group():
        t = data(RANK, 4, torch.float32).to(NEURON)
        dist.all_reduce(t, group=pair)
        equal(t, sum(data(r, 4, torch.float32) for r in range(WORLD)), "all_reduce on new_group(all ranks)")
        u = data(RANK, 4, torch.float32).to(NEURON)
        if RANK == WORLD - 1:
            dist.all_reduce(u, group=alone)  # a group of one: its own value
            assert dist.get_backend(alone) == "neuron" and dist.get_world_size(alone) == 1
        else:
            assert alone == dist.GroupMember.NON_GROUP_MEMBER
        equal(u, data(RANK, 4, torch.float32), "all_reduce on a one-rank group")
    cases.check("new_group", sub_group)

    def objects():
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, {"rank": RANK, "name": f"r{RANK}"})
        assert gathered == [{"rank": r, "name": f"r{r}"} for r in range(WORLD)], gathered
        objs = [RANK * 10, "x"] if RANK == 1 else [None, None]
        dist.broadcast_object_list(objs, src=1)
        assert objs == [10, "x"], objs
        got = [None] * WORLD if RANK == 0 else None
        dist.gather_object(("g", RANK), got, dst=0)
        assert RANK != 0 or got == [("g", r) for r in range(WORLD)], got
        out = [None]
        dist.scatter_object_list(out, [f"s{r}" for r in range(WORLD)] if RANK == 0 else None, src=0)
        assert out == [f"s{RANK}"], out
    cases.check("object collectives", objects)


def _layout(cases: Cases) -> None:
    everyone = torch.stack([torch.arange(24, dtype=torch.float32).view(4, 6) + 100 * r for r in range(WORLD)])

    def non_contiguous():
        base = everyone[RANK].to(NEURON)
        columns = base[:, ::2]  # every other column: not contiguous
        dist.all_reduce(columns)
        want = everyone[RANK].clone()
        want[:, ::2] = everyone.sum(0)[:, ::2]
        equal(base, want, "all_reduce of a strided view (the other columns untouched)")
        out = torch.zeros(6, WORLD * 4, device=NEURON).t()  # a transposed output
        dist.all_gather_into_tensor(out, everyone[RANK].to(NEURON))
        equal(out, everyone.reshape(WORLD * 4, 6), "all_gather_into_tensor into a transposed tensor")
    cases.check("non-contiguous tensors", non_contiguous)


# ------------------------------------------------------------------------------------------------
# scenario: the three ways to create the group


def scenario_init_variants() -> dict:
    cases = Cases()
    everyone = torch.stack([data(r, 4, torch.float32) for r in range(WORLD)])

    def reduces(label):
        for device in (NEURON, torch.device("cpu")):
            t = on(device, everyone[RANK])
            dist.all_reduce(t)
            equal(t, everyone.sum(0), f"all_reduce on {device} after {label}")

    def no_argument():
        init(None, store=None)  # env:// (MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE), accelerator's default backend
        try:
            # torch records the backend of a no-argument group as "undefined" (on CUDA too)
            assert dist.get_default_backend_for_device("neuron") == "neuron"
            assert type(dist.group.WORLD).__name__ == "NeuronProcessGroup", type(dist.group.WORLD)
            assert dist.group.WORLD.getBackendName() == "neuron"
            reduces("init_process_group()")
        finally:
            dist.destroy_process_group()
    cases.check("init_process_group()", no_argument)

    def named(backend, store):
        init(backend, store=store)
        try:
            assert dist.get_backend() == backend, dist.get_backend()
            assert type(dist.group.WORLD).__name__ == "NeuronProcessGroup", type(dist.group.WORLD)
            reduces(f"init_process_group({backend!r})")
        finally:
            dist.destroy_process_group()
    cases.check("init_process_group('neuron')", lambda: named("neuron", "store-a"))
    cases.check("init_process_group('cpu:gloo,neuron:neuron')", lambda: named("cpu:gloo,neuron:neuron", "store-b"))
    return cases.result()


# ------------------------------------------------------------------------------------------------
# scenario: DDP on neuron against one process on the whole batch


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


_STEPS, _BATCH = 3, 8  # per rank


def _data() -> tuple[list, list]:
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(_BATCH * WORLD, 16, generator=gen) for _ in range(_STEPS)]
    ys = [torch.randn(_BATCH * WORLD, 4, generator=gen) for _ in range(_STEPS)]
    return xs, ys


def _train(model, xs, ys, part=slice(None), device="cpu", reduce_loss=False) -> list:
    """AdamW steps of mse_loss on each batch's ``part``; the losses (averaged over the ranks when
    ``reduce_loss``: the whole batch's loss, as the halves are equal)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[part].to(device)), y[part].to(device))
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        if reduce_loss:
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        losses.append(mean.item())
    return losses


def _rank_part() -> slice:
    return slice(RANK * _BATCH, (RANK + 1) * _BATCH)


def scenario_ddp() -> dict:
    init("neuron")
    xs, ys = _data()
    reference = _model()  # one process, CPU, the whole batch
    ref_losses = _train(reference, xs, ys)

    model = torch.nn.parallel.DistributedDataParallel(_model().to(NEURON), bucket_cap_mb=0.001)  # several buckets
    losses = _train(model, xs, ys, _rank_part(), NEURON, reduce_loss=True)

    params = torch.cat([p.detach().cpu().flatten() for p in model.parameters()])
    every = [torch.zeros_like(params) for _ in range(WORLD)]
    dist.all_gather(every, params)
    same_on_all = all(torch.equal(every[0], p) for p in every)
    ref_params = torch.cat([p.detach().flatten() for p in reference.parameters()])
    dist.destroy_process_group()
    return {"losses": losses, "reference": ref_losses, "same_on_all_ranks": same_on_all,
            "max_param_diff": (params - ref_params).abs().max().item()}


# ------------------------------------------------------------------------------------------------
# scenario: FSDP2 fully_shard on a neuron DeviceMesh against one process on the whole batch


def scenario_fsdp2() -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    init("neuron")
    mesh = init_device_mesh("neuron", (WORLD,))
    xs, ys = _data()
    reference = _model()
    ref_losses = _train(reference, xs, ys)

    model = _model().to(NEURON)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)  # resharded after forward (the default)
    fully_shard(model, mesh=mesh)
    losses = _train(model, xs, ys, _rank_part(), NEURON, reduce_loss=True)
    sharded = [type(p).__name__ for p in model.parameters()]
    params = torch.cat([p.full_tensor().cpu().flatten() for p in model.parameters()])
    ref_params = torch.cat([p.detach().flatten() for p in reference.parameters()])
    dist.destroy_process_group()
    return {"losses": losses, "reference": ref_losses, "param_types": sharded,
            "max_param_diff": (params - ref_params).abs().max().item()}


# ------------------------------------------------------------------------------------------------
# scenario: bad input on every rank


def scenario_bad_input() -> dict:
    init("neuron")
    errors = {}

    def error_of(fn) -> str:
        try:
            fn()
        except Exception as err:
            return f"{type(err).__name__}: {err}"
        return "no error"

    n = 4 if RANK == 0 else 6
    errors["numel"] = error_of(lambda: dist.all_reduce(torch.ones(n, device=NEURON)))
    dtype = torch.float32 if RANK == 0 else torch.int64
    errors["dtype"] = error_of(lambda: dist.broadcast(torch.ones(4, dtype=dtype, device=NEURON), src=0))
    errors["gather shape"] = error_of(lambda: dist.all_gather_into_tensor(
        torch.zeros(WORLD * n, device=NEURON), torch.ones(n, device=NEURON)))
    errors["mixed devices"] = error_of(lambda: dist.all_gather([torch.zeros(4), torch.zeros(4)], torch.ones(4, device=NEURON)))
    errors["premul_sum"] = error_of(lambda: dist.all_reduce(torch.ones(4, device=NEURON), op=dist._make_nccl_premul_sum(2.0)))
    # the group still works after refusing those
    t = torch.full((4,), float(RANK + 1), device=NEURON)
    dist.all_reduce(t)
    errors["after"] = t.cpu().tolist()
    dist.destroy_process_group()
    return errors


# ------------------------------------------------------------------------------------------------
# scenario: a peer exits; the survivor gets an error within the timeout


def scenario_peer_exits() -> dict:
    init("neuron")
    t = torch.ones(4, device=NEURON)
    dist.all_reduce(t)
    if RANK == 1:
        time.sleep(1.0)  # rank 0 is inside its next all_reduce by now
        sys.stdout.flush()
        os._exit(7)
    out = {}
    for label, check in (("unchecked", "0"), ("checked", "1"), ("again", "0")):
        os.environ["TORCH_NEURONX_DIST_CHECK"] = check
        try:
            dist.all_reduce(torch.ones(1024, device=NEURON))
            out[label] = "no error"
        except Exception as err:
            out[label] = f"{type(err).__name__}: {err}"
    try:
        torch.neuron.synchronize()
        out["synchronize"] = "no error"
    except Exception as err:
        out["synchronize"] = f"{type(err).__name__}: {err}"
    return out


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items() if name.startswith("scenario_")}

if __name__ == "__main__":
    result = SCENARIOS[sys.argv[1]]()
    print("RESULT " + json.dumps(result), flush=True)
    # no interpreter teardown: a survivor's gloo threads may still hold a dead peer's socket
    os._exit(0)
