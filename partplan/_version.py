"""The package version (one place; the facade and the plan store read it)."""
__version__ = "0.1.0"
