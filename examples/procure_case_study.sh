#!/usr/bin/env sh
# Procurement worked example (README "Procurement: what to buy and what it costs"): the case
# study priced with the shipped prices and compared at equal cost, then the cheapest deployment
# for 4 req/s over the default candidate sites (every GPU with a prefill profile for the model x
# every link offering of data/links/), then the same with an H200 priced at twice an H20, then
# the cheapest deployment for 2 req/s whose P90 TTFT at 2 req/s stays within 8 s.
# `--format F` replaces the Markdown default; `--requests N` (a simulate option the example
# scripts are all run with by tests/test_readme.py) has no meaning here and is dropped.
set -e
cd "$(dirname "$0")/.."
format="markdown" skip=""
for arg in "$@"; do
    if [ -n "$skip" ]; then eval "$skip=\$arg"; skip=""; continue; fi
    case $arg in
        --format | -f) skip=format ;;
        --format=*) format="${arg#--format=}" ;;
        --requests) skip=ignored ;;
        --requests=*) ;;
        *) echo "procure_case_study.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done
prfaas-plan optimize examples/case_study.yaml --format "$format"
prfaas-plan procure examples/case_study.yaml --target-rps 4 --format "$format"
prfaas-plan procure examples/case_study.yaml --target-rps 4 --gpu-price h200=2.4 --format "$format"
prfaas-plan procure examples/case_study.yaml --target-rps 2 --ttft-target-s 8 --format "$format"
