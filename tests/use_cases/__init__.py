"""Tests of the use-cases (prfaas_plan/use_cases/): the case study, catalog commands, check, cost, explain, the doors."""
