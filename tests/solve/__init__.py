"""Tests of the optimisers (prfaas_plan/solve/): threshold, sizing, procurement, sensitivity."""
