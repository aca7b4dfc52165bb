"""ATen's random ops on ``neuron`` tensors: one offset step reserved from the generator on the
issuing thread, then the ``neuron_rng`` op computing the numbers on the device.

Reserving at the call keeps program order without waiting for the device: ``manual_seed``,
``set_rng_state`` or another draw issued later never changes a queued draw's numbers.
"""

from __future__ import annotations

import torch

from ...device.random import generator_of, host_seed, reserve
from . import philox
from .ops import NAMESPACE

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_FLOAT_DIGITS = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8, torch.float64: 53}


def _rng():
    return getattr(torch.ops, NAMESPACE)


def draw_key(device: torch.device, generator=None) -> torch.Tensor:
    """The device int32 key of one draw from ``generator`` (None: ``device``'s default)."""
    seed, offset = reserve(generator_of(generator, device))
    return torch.tensor(philox.key_words(seed, offset), dtype=torch.int32).to(device)


def _fill(self, generator, op, *params):
    if self.numel() == 0:
        generator_of(generator, self.device)  # a wrong generator is refused even then
        return self
    key = draw_key(self.device, generator)
    if self.is_contiguous() and self.dim() != 1 and not any(isinstance(x, torch.Tensor) for x in params):
        op(self.view(-1), key, *params)  # the numbers of a row-major fill: one NEFF per element count
        return self
    return op(self, key, *params)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _fill(self, generator, _rng().normal_, float(mean), float(std))


def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    return _fill(self, generator, _rng().uniform_, float(from_), float(to))


def _check_p(p):
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")


def bernoulli_float_(self, p=0.5, *, generator=None):
    _check_p(p)
    return _fill(self, generator, _rng().bernoulli_.float, float(p))


def bernoulli_tensor_(self, p, *, generator=None):
    if p.device != self.device:
        p = p.to(self.device)
    return _fill(self, generator, _rng().bernoulli_.Tensor, p)


def bernoulli(self, *, generator=None):
    """``torch.bernoulli(p)``: 0/1 of ``p``'s shape and dtype with probabilities ``p``."""
    return bernoulli_tensor_(torch.empty_like(self), self, generator=generator)


def bernoulli_p(self, p=0.5, *, generator=None):
    return bernoulli_float_(torch.empty_like(self), p, generator=generator)


def exponential_(self, lambd=1.0, *, generator=None):
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _fill(self, generator, _rng().exponential_, float(lambd))


def geometric_(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _fill(self, generator, _rng().geometric_, float(p))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return _fill(self, generator, _rng().log_normal_, float(mean), float(std))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if sigma <= 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _fill(self, generator, _rng().cauchy_, float(median), float(sigma))


def _dtype_max(dtype: torch.dtype) -> int:
    """The top of ``random_()``'s default range, as CPU's kernel draws it."""
    if dtype == torch.bool:
        return 1
    if dtype.is_floating_point:
        return 2 ** _FLOAT_DIGITS[dtype]
    return torch.iinfo(dtype).max


def _random(self, low: int, high: int, generator):
    """Integers in [low, high) into ``self``: on the device while they fit int32 words, else
    CPU's kernel with a generator seeded from this draw's key (wider ranges need 64-bit words)."""
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if _INT32_MIN <= low and high - 1 <= _INT32_MAX:
        return _fill(self, generator, _rng().random_, int(low), int(high - low))
    if self.numel() == 0:
        return self
    seed, offset = reserve(generator_of(generator, self.device))
    host = torch.empty(self.shape, dtype=self.dtype)
    to = None if high == _dtype_max(self.dtype) + 1 else high  # the dtype's top: int64's does not fit an int64
    host.random_(low, to, generator=torch.Generator().manual_seed(host_seed(seed, offset)))
    return self.copy_(host)


def random_from(self, from_, to=None, *, generator=None):
    return _random(self, int(from_), _dtype_max(self.dtype) + 1 if to is None else int(to), generator)


def random_to(self, to, *, generator=None):
    return _random(self, 0, int(to), generator)


def random_(self, *, generator=None):
    return _random(self, 0, _dtype_max(self.dtype) + 1, generator)


def native_dropout(input, p, train=None):
    """Dropout with the mask drawn on the device (one launch computes mask and output); the
    default generator's stream, as for any draw."""
    if train is not None and not train:
        return input.clone(), torch.ones_like(input, dtype=torch.bool)
    if input.numel() == 0:
        return input.clone(), torch.empty_like(input, dtype=torch.bool)
    return _rng().dropout(input, draw_key(input.device), float(p))


# ATen schema name -> kernel, registered for PrivateUse1.
KERNELS = {
    "normal_": normal_,
    "uniform_": uniform_,
    "bernoulli_.float": bernoulli_float_,
    "bernoulli_.Tensor": bernoulli_tensor_,
    "bernoulli": bernoulli,
    "bernoulli.p": bernoulli_p,
    "exponential_": exponential_,
    "geometric_": geometric_,
    "log_normal_": log_normal_,
    "cauchy_": cauchy_,
    "random_.from": random_from,
    "random_.to": random_to,
    "random_": random_,
    "native_dropout": native_dropout,
}
