"""What gloo sees of a collective's neuron tensors: CPU tensors over their device memory.

A neuron tensor's bytes are host memory (``execution.host_view``), so gloo reads and writes them
in place. Gloo wants dense contiguous tensors: a non-contiguous one is staged through a
contiguous host copy - filled from the tensor when the collective reads it, written back when
it writes it (by the thread completing the collective, before its Work completes). The same tensor object appearing as input and
output (an in-place all_reduce) gets one host tensor.
"""

from __future__ import annotations

import torch

from ..execution import host_view


class _Staged:
    __slots__ = ("view", "host", "write_back")

    def __init__(self, t: torch.Tensor, read: bool) -> None:
        self.view = host_view(t)
        self.write_back = False
        if self.view.is_contiguous():
            self.host = self.view
        else:
            self.host = self.view.contiguous() if read else torch.empty(self.view.shape, dtype=t.dtype)


class HostStaging:
    """Host tensors for the neuron tensors of one collective. Create it after the stream was
    synchronized (staged inputs are copied at ``host``); call ``finish`` once the collective
    completed, before its Work does."""

    def __init__(self) -> None:
        self._staged: dict[int, _Staged] = {}
        self._keep: list[torch.Tensor] = []  # the ids above stay valid while we exist

    def host(self, tree, *, read: bool, write: bool):
        """``tree`` (a tensor or nested lists of tensors) with each tensor replaced by its host tensor."""
        if isinstance(tree, (list, tuple)):
            return [self.host(t, read=read, write=write) for t in tree]
        staged = self._staged.get(id(tree))
        if staged is None:
            staged = _Staged(tree, read)
            self._staged[id(tree)] = staged
            self._keep.append(tree)
        if write and staged.host is not staged.view:
            staged.write_back = True
        return staged.host

    def finish(self) -> None:
        """Write the staged outputs back into device memory."""
        for staged in self._staged.values():
            if staged.write_back:
                staged.view.copy_(staged.host)


def flatten(tree) -> list[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return [tree]
    return [t for item in tree for t in flatten(item)]
