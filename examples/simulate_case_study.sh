#!/usr/bin/env sh
# The paper's case study under load: Poisson arrivals at 50%, 80% and 95% of the plan's
# exact-mode Λ_max, 100,000 requests each, TTFT next to the model's unloaded figure.
# Its output is in the README ("Simulation"); tests/test_readme.py runs this script.
set -e
cd "$(dirname "$0")/.."
prfaas-plan simulate examples/case_study.yaml --load 0.5,0.8,0.95 --requests 100000 --seed 0 "$@"
