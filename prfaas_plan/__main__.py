from prfaas_plan.cli import main

main()
