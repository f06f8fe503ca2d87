"""The humanr mode (being written)."""
