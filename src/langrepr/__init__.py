"""langrepr: config-driven re-runs of five language-representation papers."""

__version__ = "0.1.0"
