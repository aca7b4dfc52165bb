"""How fast the timing model schedules instructions (target: >= 200k instructions/s).

Baseline, measured in the same run: a bare pass that only asks every instruction for its operands
(the floor of any per-instruction Python pass over the program).
"""

from __future__ import annotations

from _harness import best_of, report
from neuron_sim import get_architecture
from neuron_sim.programs import dependent_chain, tiled_matmul
from neuron_sim.timing import estimate


def bare_pass(program) -> None:
    for inst in program.instructions:
        inst.reads()
        inst.writes()


def main() -> None:
    arch = get_architecture("trn2")
    cases = {
        "tiled matmul 4096^3 bf16": tiled_matmul(4096, 4096, 4096, arch=arch),
        "tiled matmul 2048^3 fp32": tiled_matmul(2048, 2048, 2048, dtype="float32", arch=arch),
        "dependent VectorE chain": dependent_chain(20000, arch=arch),
    }
    print("timing model throughput (best of 5)")
    for name, program in cases.items():
        n = len(program.instructions)
        t_model = best_of(lambda p=program: estimate(p, arch))
        t_bare = best_of(lambda p=program: bare_pass(p))
        report(f"{name} ({n:,} instructions)", f"{n / t_model:,.0f} inst/s", t_model / t_bare,
               "bare operand pass", ">= 200,000 inst/s")


if __name__ == "__main__":
    main()
