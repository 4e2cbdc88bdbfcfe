"""Security tests."""
