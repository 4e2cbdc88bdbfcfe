"""Test helpers shared by every test package: broker processes (`support.broker`)."""
