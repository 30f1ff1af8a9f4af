"""Test helpers shared by every area of the test suite."""
