"""The machinery behind the maintainers' reports (README.md says what each module answers)."""
