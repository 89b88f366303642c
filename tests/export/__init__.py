"""Tests of export to serving stacks (prfaas_plan/export/)."""
