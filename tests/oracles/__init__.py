"""Independent oracles the optimisers are tested against (test-only code)."""
