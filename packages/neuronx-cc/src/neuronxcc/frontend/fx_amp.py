"""``torch.amp.GradScaler``'s two kernels as tensor ops, so unscaling the gradients and updating
the scale run on the device in one launch each, with no synchronization:

* ``_amp_foreach_non_finite_check_and_unscale``: every gradient times ``inv_scale`` (in fp32 for
  16-bit gradients, as CPU's kernel computes), and ``found_inf`` set to 1 if any element of any
  gradient is inf or NaN (left as it was otherwise: zeroing it is the caller's job);
* ``_amp_update_scale``: the scale backs off after a step with an inf, and grows (unless that
  would overflow fp32) after ``growth_interval`` consecutive good steps. The int32 step counter is
  counted in fp32, exact below 2**24 - far more steps than any ``growth_interval`` needs.

Both follow ``aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp``.
"""

from __future__ import annotations


def amp_decompositions(torch) -> dict:
    aten = torch.ops.aten
    return {
        aten._amp_foreach_non_finite_check_and_unscale.default: _check_and_unscale(torch),
        aten._amp_update_scale.default: _update_scale(torch),
    }


def _check_and_unscale(torch):
    def check_and_unscale(grads, found_inf, inv_scale):
        found = found_inf
        unscaled = []
        for g in grads:
            math = g.float() if g.dtype in (torch.float16, torch.bfloat16) else g
            found = torch.where(torch.isfinite(math).logical_not().any(), torch.ones_like(found), found)
            unscaled.append((math * inv_scale.to(math.dtype)).to(g.dtype))
        return unscaled, found

    return check_and_unscale


def _update_scale(torch):
    def update_scale(scale, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor, growth_interval):
        bad_step = found_inf != 0
        successful = growth_tracker.float() + 1
        grow = successful == float(growth_interval)
        grown = scale * scale_growth_factor
        grown = torch.where(torch.isfinite(grown), grown, scale)  # never past fp32's range to inf
        new_scale = torch.where(bad_step, scale * scale_backoff_factor, torch.where(grow, grown, scale))
        new_tracker = torch.where(bad_step | grow, torch.zeros_like(successful), successful)
        return new_scale, new_tracker.to(growth_tracker.dtype)

    return update_scale
