"""Tests of the model (prfaas_plan/analytic/): distributions, profiles, capacity, TTFT, queueing, erfc."""
