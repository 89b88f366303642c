"""`python -m prfaas_plan`: the same entry point as the `prfaas-plan` command."""

from prfaas_plan.cli import main

main()
