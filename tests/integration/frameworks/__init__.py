"""The framework conformance matrix (issue 39): docs/frameworks.md says what it holds."""
