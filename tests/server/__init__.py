"""Tests of the HTTP API and the page (prfaas_plan/server/)."""
