"""The pathgrade command line and the wiring of the embedded stack."""
