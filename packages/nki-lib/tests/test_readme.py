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
    from nkilib.moe import router
    from nkilib.norm import layernorm, residual_rmsnorm, rmsnorm

    text = README.read_text()
    rows = {
        "RMSNorm |": (rmsnorm.max_hidden, {}), "RMSNorm backward": (rmsnorm.max_hidden, {"backward": True}),
        "LayerNorm |": (layernorm.max_hidden, {}), "LayerNorm backward": (layernorm.max_hidden, {"backward": True}),
        "residual add + RMSNorm": (residual_rmsnorm.max_hidden, {}), "RoPE |": (rotary.max_heads_x_dim, {}),
        "softmax |": (lastdim_softmax.max_cols, {}), "softmax backward": (lastdim_softmax.max_cols, {"backward": True}),
        "router top-k": (router.max_experts, {}),
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


def test_readme_states_the_moe_and_mlp_sbuf_limits():
    import ml_dtypes
    import numpy as np
    from nkilib import NkilibError
    from nkilib.mlp.gated_mlp import check as mlp_check
    from nkilib.moe.blockwise_matmul import check as moe_check

    def z(*shape):
        return np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), shape)

    def fits(check, *args, **kw):
        try:
            check(*args, **kw)
        except NkilibError:
            return False
        return True

    rows, block = np.full(512, -1, np.int32), np.zeros(1, np.int32)
    text = README.read_text()
    assert fits(moe_check, z(4, 2048), z(2, 2048, 2048), rows, block) and not fits(moe_check, z(4, 2560), z(2, 2560, 2560), rows, block)
    assert "K = N = 2048 (bf16, blocks of 512) fits, 2560 does not" in text
    assert fits(moe_check, z(4, 1024), z(2, 1024, 1024), rows, block, backward=True)
    assert not fits(moe_check, z(4, 1536), z(2, 1536, 1536), rows, block, backward=True)
    assert "K = N = 1024 fits, 1536 does not (bf16, blocks of 512)" in text
    assert fits(mlp_check, z(4, 1024), z(1024, 2816), z(1024, 2816), z(2816, 1024))
    assert not fits(mlp_check, z(4, 1536), z(1536, 4096), z(1536, 4096), z(4096, 1536))
    assert "H = 1024, I = 2816 (bf16) fits, H = 1536, I = 4096 does not" in text
