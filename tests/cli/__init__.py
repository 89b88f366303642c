"""Tests of the command line (prfaas_plan/cli/): flags, help, exit codes, the installed entry point."""
