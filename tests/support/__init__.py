"""Test support shared across test packages (harnesses, fixtures); never a test module itself."""
