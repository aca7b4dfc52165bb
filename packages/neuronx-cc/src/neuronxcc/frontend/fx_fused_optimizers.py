"""``torch.optim``'s fused kernels (``fused=True``: ``_fused_adam``, ``_fused_adamw``, ``_fused_sgd``,
``_fused_adagrad``)
as tensor ops, so a whole optimizer step over a parameter group is one graph - one launch.

Each follows CPU's fused kernel (``aten/src/ATen/native/cpu/Fused*Kernel.cpp``) in its order of
operations, in the parameters' dtype. Where CPU computes the step's scalars in double on the host
(bias corrections from ``state_steps``, read with ``.item()``), these compute them on the device
from the step tensors in float32 - no synchronization, and ``lr`` may be a tensor (the
``tensor_lr`` overloads), so a scheduled learning rate never recompiles. Equal to CPU's within
float32 rounding of those scalars. ``found_inf`` (GradScaler) set to 1 leaves every tensor as it
was, as CPU's kernel returns early; ``grad_scale`` divides the gradients, which are written back.
"""

from __future__ import annotations


def fused_optimizer_decompositions(torch) -> dict:
    aten = torch.ops.aten
    table = {}
    for overload in ("default", "tensor_lr"):
        table[getattr(aten._fused_adam, overload)] = _adam(torch, decoupled=False)
        table[getattr(aten._fused_adamw, overload)] = _adam(torch, decoupled=True)
        table[getattr(aten._fused_sgd, overload)] = _sgd(torch)
        table[getattr(aten._fused_adagrad, overload)] = _adagrad(torch, returns_steps=overload == "default")
    return table


def _unscaled(torch, grads, grad_scale):
    return [g if grad_scale is None else g / grad_scale.to(g.dtype) for g in grads]


def _unless_inf(torch, found_inf, new, old):
    """``new``, or ``old`` where GradScaler found an inf or NaN (``found_inf == 1``)."""
    if found_inf is None:
        return new
    skip = found_inf == 1.0
    return [torch.where(skip, o, n) for n, o in zip(new, old)]


def _adam(torch, decoupled: bool):
    def fused_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
                   weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        new_p, new_g, new_m, new_v, new_max = [], [], [], [], []
        unscaled = _unscaled(torch, grads, grad_scale)
        for i, (p, g) in enumerate(zip(params, unscaled)):
            step = state_steps[i].to(torch.float32)
            bias_correction1 = 1 - torch.pow(beta1, step)
            step_size = lr / bias_correction1
            bias_correction2_sqrt = torch.sqrt(1 - torch.pow(beta2, step))
            grad = -g if maximize else g
            param = p
            if weight_decay != 0:
                if decoupled:  # AdamW: the parameter decays
                    param = param * (1 - lr * weight_decay)
                else:  # Adam: the decay joins the gradient
                    grad = grad + param * weight_decay
            m = exp_avgs[i] * beta1 + grad * (1 - beta1)
            v = exp_avg_sqs[i] * beta2 + grad * grad * (1 - beta2)
            if amsgrad:
                v_max = torch.maximum(max_exp_avg_sqs[i], v)
                new_max.append(v_max)
                denom = torch.sqrt(v_max) / bias_correction2_sqrt.to(p.dtype) + eps
            else:
                denom = torch.sqrt(v) / bias_correction2_sqrt.to(p.dtype) + eps
            new_p.append(param - step_size.to(p.dtype) * m / denom)
            new_g.append(g)
            new_m.append(m)
            new_v.append(v)
        if not amsgrad:
            new_max = list(max_exp_avg_sqs)
        return (_unless_inf(torch, found_inf, new_p, params),
                _unless_inf(torch, found_inf, new_g, grads) if grad_scale is not None else list(grads),
                _unless_inf(torch, found_inf, new_m, exp_avgs),
                _unless_inf(torch, found_inf, new_v, exp_avg_sqs),
                _unless_inf(torch, found_inf, new_max, max_exp_avg_sqs))

    return fused_adam


def _sgd(torch):
    def fused_sgd(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize,
                  is_first_step, grad_scale=None, found_inf=None):
        new_p, new_g, new_buf = [], [], []
        unscaled = _unscaled(torch, grads, grad_scale)
        for i, (p, g) in enumerate(zip(params, unscaled)):
            grad = -g if maximize else g
            if weight_decay != 0:
                grad = grad + p * weight_decay
            if momentum != 0:
                buf = grad if is_first_step else momentum_buffer_list[i] * momentum + grad * (1 - dampening)
                new_buf.append(buf)
                grad = grad + buf * momentum if nesterov else buf
            new_p.append(p - grad * lr)
            new_g.append(g)
        if momentum == 0:
            new_buf = list(momentum_buffer_list)
        return (_unless_inf(torch, found_inf, new_p, params),
                _unless_inf(torch, found_inf, new_g, grads) if grad_scale is not None else list(grads),
                _unless_inf(torch, found_inf, new_buf, momentum_buffer_list))

    return fused_sgd


def _adagrad(torch, returns_steps: bool):
    def fused_adagrad(params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize,
                      grad_scale=None, found_inf=None):
        new_p, new_g, new_sum = [], [], []
        unscaled = _unscaled(torch, grads, grad_scale)
        for p, g, state_sum, step in zip(params, unscaled, state_sums, state_steps):
            clr = lr / (1 + (step.to(torch.float32) - 1) * lr_decay)
            grad = -g if maximize else g
            if weight_decay != 0:
                grad = grad + p * weight_decay
            total = state_sum + grad * grad
            std = torch.sqrt(total) + eps
            new_p.append(p - clr.to(p.dtype) * grad / std)
            new_g.append(g)
            new_sum.append(total)
        results = (_unless_inf(torch, found_inf, new_p, params),
                   _unless_inf(torch, found_inf, new_g, grads) if grad_scale is not None else list(grads),
                   _unless_inf(torch, found_inf, new_sum, state_sums))
        # the default overload also hands back state_steps (which it does not change)
        return (*results, list(state_steps)) if returns_steps else results

    return fused_adagrad
