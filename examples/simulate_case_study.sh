#!/usr/bin/env sh
# The paper's case study under load: Poisson arrivals at 50%, 80% and 95% of the plan's
# exact-mode Λ_max, 100,000 requests each, TTFT next to the model's unloaded figure.
# Its output is in the README ("Simulation"); tests/test_readme.py runs this script.
# Arguments are passed on; one that sets what a default below sets replaces that default
# (`--requests 2000`), as prfaas-plan refuses an option given twice.
set -e
cd "$(dirname "$0")/.."
load="--load 0.5,0.8,0.95" requests="--requests 100000" seed="--seed 0"
for arg in "$@"; do
    case $arg in
        --load | --load=* | --rate-rps | --rate-rps=*) load="" ;;
        --requests | --requests=* | --duration-s | --duration-s=*) requests="" ;;
        --seed | --seed=*) seed="" ;;
    esac
done
# the defaults are split into words on purpose
# shellcheck disable=SC2086
prfaas-plan simulate examples/case_study.yaml $load $requests $seed "$@"
