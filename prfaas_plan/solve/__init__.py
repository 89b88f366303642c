"""Optimisers: threshold/split search, TTFT-constrained search, cluster sizing MILP, shared search
helpers. The only home of solver libraries.
"""
