"""The HTTP shell: parses, authenticates, calls the core, serializes, counts and logs."""
