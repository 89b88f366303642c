"""Tests of the closed forms (prfaas_plan/symbolic/): elasticities in every regime."""
