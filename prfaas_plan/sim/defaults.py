"""The simulator's default run sizes and load, defined once (the simulation specs, the policy
comparison and the CLI's option defaults and help refer to these). Free of numpy, so the CLI can
read them at start-up."""

LOAD_FRACTION = 0.8  # of the plan's exact-mode Λ_max
SIMULATED_REQUESTS = 100_000  # per `simulate` run (and per step of the sustainable-rate search)
COMPARISON_REQUESTS = 20_000  # per stress scenario of `compare-policies`
SEED = 0  # of the arrivals' and the policy comparison's random draws
