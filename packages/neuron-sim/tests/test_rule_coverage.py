"""Every rule id the ISA, memories, executor, timing, runtime, builder and program can raise is triggered by a test.

Rule ids are collected from the source (``...Error("rule.id", ...)``) and must appear, quoted, in
some test that checks ``err.rule``. A new rule without a test fails here.
"""

import pathlib
import re

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "neuron_sim"
TESTS = pathlib.Path(__file__).resolve().parent
MODULES = ["isa", "memory", "executor", "timing", "runtime", "builder.py", "program.py", "dtypes.py"]
# rule ids built from f-strings: their possible values
TEMPLATES = {
    "{what}.pattern": ["iota.pattern", "affine_select.pattern", "random_words.pattern"],
    "{self.memory}.capacity": ["sbuf.capacity", "psum.capacity"],
}
RULE = re.compile(r'Error\(\s*f?"((?:[a-z0-9_]|\{[a-z_.]+\})+\.[a-z0-9_]+)"')


def source_rules() -> set[str]:
    rules = set()
    for name in MODULES:
        path = SRC / name
        for f in [path] if path.is_file() else sorted(path.glob("*.py")):
            for rule in RULE.findall(f.read_text()):
                rules.update(TEMPLATES.get(rule, [rule]))
    return rules


def test_rule_ids_are_found():
    rules = source_rules()
    assert {"matmul.moving_fmax", "partition.start", "engine.memory_access", "psum.bank_overflow", "sbuf.capacity"} <= rules
    assert not any("{" in r for r in rules), "a templated rule id needs an entry in TEMPLATES"


def test_every_rule_has_a_test():
    tested = "\n".join(p.read_text() for p in TESTS.rglob("test_*.py") if p.name != pathlib.Path(__file__).name)
    missing = sorted(r for r in source_rules() if f'"{r}"' not in tested)
    assert not missing, f"rules without a test that triggers them: {missing}"
