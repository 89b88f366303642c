"""`python -m prfaas_plan`: the same entry point as the `prfaas-plan` command."""

from prfaas_plan.cli import main

if __name__ == "__main__":  # not when a `serve` worker process (spawned) imports it
    main()
