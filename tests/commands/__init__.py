"""Tests of the use-cases (prfaas_plan/commands/): the case study, catalog commands, check, cost, explain, the doors."""
