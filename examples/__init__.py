"""Examples and the maintainers' studies; importable from the repository root (`examples.studies`)."""
