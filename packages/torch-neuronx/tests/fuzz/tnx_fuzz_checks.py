"""How a device result is compared with CPU's, per op.

Each comparison is of one op applied to the same operand values on both sides (the program
runner feeds CPU the device's own intermediate values), so a tolerance only has to cover what a
correct implementation of that one op may do differently:

* ``exact``: integers and bools bit for bit; floats equal (NaN where CPU has NaN, -0.0 == 0.0).
  Data movement, comparisons, casts and every op the IEEE rules pin down - add, sub, mul, div
  (fp32 math rounds once, then once more to a 16-bit output, on CPU as on the engines).
* ``nan_sign`` (signbit, copysign): exact, except that where the sign comes from a NaN (the last
  operand) either sign is right. IEEE 754 (6.3) leaves the sign of a NaN an operation makes
  unspecified, and CPU's differs by dtype (+NaN from float32 log(-1), -NaN from bfloat16 0/0).
* ``alpha`` (``torch.add(a, b, alpha=k)``): exact, plus the rounding of ``k * b``: CPU fuses it into
  one rounding (a fused multiply-add), an engine may round the product first; PyTorch promises neither.
  For float16 / bfloat16 the product may be rounded to the 16-bit dtype: CPU's own kernel does so
  where it runs element by element (a strided operand, the last ``numel % 32`` elements, tensors of
  under 32: two AVX2 vectors of 16-bit values; twice that with AVX-512), and computes in fp32 with one rounding where it runs vectorized, so CPU's answer for the
  same values depends on the layout.
* ``ulp``: transcendental functions (exp, log, tanh...): both sides compute in fp32 with a few
  ulp of error, then round to the output dtype: 4 fp32 ulp, plus one ulp of a 16-bit output.
* ``argument``: as ``ulp``, plus 4 fp32 ulp of the argument: sin (range reduction) and GELU
  (x * (1 + erf(x / sqrt 2)) / 2 cancels in fp32 for x < 0: its error is eps32 * |x|).
* ``pow``: exp(y * log(x)) in fp32: the rounding of y*log(x) moves the result by |log r| ulp.
* ``sum`` (sum, cumsum, matmul, einsum): n terms accumulated in fp32 in any order differ by at
  most n * eps32 * sum|terms| (the classic gamma_n bound, for both sides), plus the rounding of
  the result. ``n`` and ``sum|terms|`` come from the op itself applied to ones and to |operands|.
* ``mean``: the sum's bound divided by the count; ``prod``: (n + 1) ulp relative; ``var``/``std``:
  (2n + 4) * eps32 * sum(x^2) / (n - correction), and its square root for std; ``softmax``,
  ``log_softmax``, ``logsumexp``: the rounding of x - max (|x - max| ulp) and of the sum (2n ulp).
  For float16 / bfloat16, CPU's softmax and log_softmax kernels round the sum of exponentials to
  the 16-bit dtype (one sum of [0.5, -4, 3, -4.67] in fp16 is 1.083 for 1.0835: log_softmax
  -0.0797 where fp32 math gives -0.0802): n ulp of that dtype, relative for softmax and absolute
  for log_softmax (the log of a sum off by a factor 1 + e moves by e).

``reval(*operands)`` evaluates the op again on other operands (in float64) for these bounds.
"""

from __future__ import annotations

import math

import torch

EPS32 = torch.finfo(torch.float32).eps


def _eps_out(dtype: torch.dtype) -> float:
    """One ulp (relative) of a 16-bit output: the two sides' fp32 values may round apart."""
    return 0.0 if dtype == torch.float32 else torch.finfo(dtype).eps


def _inf_as_finite(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """+-inf as +-2**(emax+1), the value that rounds to inf: a result at the overflow threshold
    compares by its distance, not as infinitely far."""
    big = 2.0 * 2.0 ** math.floor(math.log2(torch.finfo(dtype).max))
    return torch.where(torch.isinf(x), torch.sign(x) * big, x)


def _abs64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().double().abs() if t.dtype != torch.bool else t.double()


def _tol_exact(want, operands, params, reval):
    return torch.zeros((), dtype=torch.float64)


def _tol_ulp(want, operands, params, reval):
    w = want.double().abs()
    return (4 * EPS32 + _eps_out(want.dtype)) * w


def _tol_argument(want, operands, params, reval):
    return _tol_ulp(want, operands, params, reval) + 4 * EPS32 * _abs64(operands[0])


def _tol_pow(want, operands, params, reval):
    w = want.double().abs()
    log_r = torch.nan_to_num(torch.log(w).abs(), posinf=0.0, neginf=0.0)
    return (4 + log_r) * EPS32 * w + _eps_out(want.dtype) * w


def _tol_alpha(want, operands, params, reval):
    product = abs(params.get("alpha", 1)) * _abs64(operands[1])
    if want.dtype in (torch.float16, torch.bfloat16):  # the product rounded to it, subnormals included
        info = torch.finfo(want.dtype)
        return info.eps * (product + info.tiny) + _eps_out(want.dtype) * want.double().abs()
    return EPS32 * product + _eps_out(want.dtype) * want.double().abs()


def _terms(reval, operands):
    """(n, sum|terms|) per output element of an accumulating op."""
    n = reval(*[torch.ones_like(t, dtype=torch.float64) for t in operands]).double()
    magnitude = reval(*[_abs64(t) for t in operands]).double()
    return n, magnitude


def _tol_sum(want, operands, params, reval):
    n, magnitude = _terms(reval, operands)
    return n * EPS32 * magnitude + (EPS32 + _eps_out(want.dtype)) * want.double().abs()


def _tol_mean(want, operands, params, reval):
    n = operands[0].numel() / max(want.numel(), 1)
    magnitude = reval(*[_abs64(t) for t in operands]).double()
    return (n + 1) * EPS32 * magnitude + (EPS32 + _eps_out(want.dtype)) * want.double().abs()


def _tol_prod(want, operands, params, reval):
    n = torch.log2(reval(*[torch.full_like(t, 2.0, dtype=torch.float64) for t in operands]).double())
    w = want.double().abs()
    tiny = torch.finfo(want.dtype).tiny
    return (n + 1) * EPS32 * w + _eps_out(want.dtype) * w + (n + 1) * tiny


def _reduced(x: torch.Tensor, params: dict):
    """x over the op's reduced dimension, kept (x.dim() == 0: the whole of it)."""
    d = params.get("dim", 0) if x.dim() else 0
    return d, x.shape[d] if x.dim() else 1


def _tol_var(want, operands, params, reval):
    x = operands[0].double()
    d, n = _reduced(x, params)
    c = params.get("c", 1)
    squares = (x ** 2).sum(d, keepdim=bool(params.get("kd", False))) if x.dim() else x ** 2
    return (2 * n + 4) * EPS32 * squares / max(n - c, 1) + (EPS32 + _eps_out(want.dtype)) * want.double().abs()


def _tol_std(want, operands, params, reval):
    return _tol_var(want.double() ** 2, operands, params | {"c": 1}, reval).sqrt() + _eps_out(want.dtype) * want.double().abs()


def _spread(x: torch.Tensor, d: int):
    """|x - max| along d (0 where x is -inf or the max is not finite: those give exact 0s or NaNs)."""
    m = x.amax(d, keepdim=True) if x.numel() else x
    return torch.nan_to_num((x - m).abs(), nan=0.0, posinf=0.0), m


def _tol_softmax(want, operands, params, reval):
    x = operands[0].double()
    d, n = _reduced(x, params)
    spread, _ = _spread(x, d) if x.dim() else (torch.zeros_like(x), x)
    return ((spread + 2 * n + 4) * EPS32 + (n + 1) * _eps_out(want.dtype)) * want.double().abs()


def _tol_log_softmax(want, operands, params, reval):
    x = operands[0].double()
    d, n = _reduced(x, params)
    spread, _ = _spread(x, d) if x.dim() else (torch.zeros_like(x), x)
    w = want.double().abs()
    log_sum = torch.nan_to_num((w - spread).abs(), nan=0.0, posinf=0.0)
    return (spread + log_sum + w + 2 * n + 4) * EPS32 + _eps_out(want.dtype) * (w + n)


def _tol_logsumexp(want, operands, params, reval):
    x = operands[0].double()
    d, n = _reduced(x, params)
    w = want.double().abs()
    m = x.amax(d) if x.dim() and x.numel() else x if not x.dim() else torch.zeros_like(w)  # empty: -inf, exact
    return (torch.nan_to_num(m.abs(), nan=0.0, posinf=0.0) + w + 2 * n + 4) * EPS32 + _eps_out(want.dtype) * w


CHECKS = {
    "exact": _tol_exact, "nan_sign": _tol_exact, "alpha": _tol_alpha, "ulp": _tol_ulp, "argument": _tol_argument, "pow": _tol_pow, "sum": _tol_sum,
    "mean": _tol_mean, "prod": _tol_prod, "var": _tol_var, "std": _tol_std, "softmax": _tol_softmax,
    "log_softmax": _tol_log_softmax, "logsumexp": _tol_logsumexp,
}


def _sign_of_nan_as_cpu(got: torch.Tensor, want: torch.Tensor, sign_source: torch.Tensor) -> torch.Tensor:
    """``got`` with CPU's sign where ``sign_source`` (broadcast to the result) is NaN."""
    nan = torch.broadcast_to(torch.isnan(sign_source), want.shape)
    return torch.where(nan, want if want.dtype == torch.bool else torch.copysign(got, want), got)


def layout(t: torch.Tensor) -> tuple:
    """dtype, shape and the strides that carry layout (those of dims longer than 1)."""
    strides = tuple(s for n, s in zip(t.shape, t.stride()) if n > 1) if t.numel() > 1 else ()
    return t.dtype, tuple(t.shape), strides


def differences(got: torch.Tensor, want: torch.Tensor, check: str = "exact", operands=(), params=None, reval=None) -> str | None:
    """None if ``got`` (a CPU copy of the device result) passes ``check`` against ``want``, else
    what differs: the number of elements and the first few, with the allowed error."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype} {tuple(got.shape)} vs cpu {want.dtype} {tuple(want.shape)}"
    if check == "nan_sign" and operands:
        got = _sign_of_nan_as_cpu(got, want, operands[-1])
    if not want.dtype.is_floating_point:
        bad = got != want
        allowed = None
    else:
        g, w = got.double(), want.double()
        nan_g, nan_w = torch.isnan(g), torch.isnan(w)
        allowed = CHECKS[check if check in CHECKS else "exact"](want, operands, params or {}, reval)
        allowed = torch.nan_to_num(allowed.double(), nan=0.0, posinf=math.inf).expand_as(w) if w.dim() else allowed.double()
        gap = (_inf_as_finite(g, want.dtype) - _inf_as_finite(w, want.dtype)).abs()
        bad = (nan_g != nan_w) | (~nan_w & ~nan_g & (g != w) & ~(gap <= allowed))
    if not bool(bad.any()):
        return None
    where = bad.nonzero().tolist()
    shown = []
    for idx in where[:3]:
        i = tuple(idx)
        item = f"at {list(i)}: neuron {got[i].item()!r} vs cpu {want[i].item()!r}"
        if allowed is not None and check != "exact":
            item += f" (allowed {allowed[i].item():.3g})" if allowed.dim() else f" (allowed {allowed.item():.3g})"
        shown.append(item)
    return f"{len(where)} of {want.numel()} elements differ ({check}): " + "; ".join(shown)
