"""onceflow: exactly-once streaming in Python."""

__version__ = "0.1.0"
