"""The README's examples run as written, and its SBUF limits are the kernels' own."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 2  # numpy, then PyTorch
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "us of simulated device time" in out and "torch.Size([130, 200])" in out


def test_readme_table_states_each_kernels_widest_row():
    from nkilib.embeddings import rotary
    from nkilib.misc import lastdim_softmax
    from nkilib.norm import layernorm, residual_rmsnorm, rmsnorm

    text = README.read_text()
    rows = {
        "RMSNorm |": (rmsnorm.max_hidden, {}), "RMSNorm backward": (rmsnorm.max_hidden, {"backward": True}),
        "LayerNorm |": (layernorm.max_hidden, {}), "LayerNorm backward": (layernorm.max_hidden, {"backward": True}),
        "residual add + RMSNorm": (residual_rmsnorm.max_hidden, {}), "RoPE |": (rotary.max_heads_x_dim, {}),
        "softmax |": (lastdim_softmax.max_cols, {}), "softmax backward": (lastdim_softmax.max_cols, {"backward": True}),
    }
    for name, (limit, kw) in rows.items():
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {name}"))
        assert f"{limit('float32', **kw)} / {limit('bfloat16', **kw)}" in line, (name, line)


def test_readme_states_the_longest_attention_sequence():
    import ml_dtypes
    import numpy as np
    from nkilib import NkilibError
    from nkilib.attention.flash_attention import check

    def fits(seq, dim, dtype):
        a = np.broadcast_to(np.zeros((), dtype), (1, 1, seq, dim))
        try:
            check(a, a, a)
        except NkilibError:
            return False
        return True

    line = next(ln for ln in README.read_text().splitlines() if ln.startswith("| flash attention forward"))
    for seq, dim, dtype in ((49404, 128, ml_dtypes.bfloat16), (32254, 64, np.float32)):
        assert fits(seq, dim, dtype) and not fits(seq + 1, dim, dtype) and str(seq) in line


def test_readme_states_the_longest_paged_context():
    import ml_dtypes
    import numpy as np
    from nkilib import NkilibError
    from nkilib.attention.paged_attention import check

    def fits(width):
        q = np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), (1, 8, 1, 128))
        cache = np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), (10, 16, 8, 128))
        try:
            check(q, cache, cache, np.zeros((1, width), np.int32), np.array([1], np.int32))
        except NkilibError:
            return False
        return True

    line = next(ln for ln in README.read_text().splitlines() if ln.startswith("| paged attention"))
    assert fits(320) and not fits(321) and "320 blocks of 16 = 5120 tokens" in line
