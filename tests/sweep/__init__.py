"""Tests of sweeps (prfaas_plan/sweep/)."""
