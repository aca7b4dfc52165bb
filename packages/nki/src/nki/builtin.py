"""``nki.builtin``: the functions NKI kernels call without an import (the CPU simulator installs
them as ``builtins.builtin``) - here the nki.language functions."""

from .language import *  # noqa: F403
from .language import __all__  # noqa: F401
