"""Tests of files, the catalog, scenarios, traces, metrics and profile importers (prfaas_plan/inputs/)."""
