"""Tests of sweeps (prfaas_plan/study/)."""
