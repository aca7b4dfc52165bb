from .exact import ExactExecutor

__all__ = ["ExactExecutor"]
