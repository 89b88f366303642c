"""Tests of the simulator (prfaas_plan/sim/) and its commands."""
