"""The analytical model: length distributions, profile fits, architecture, capacity (eq. 3-6),
unloaded and loaded TTFT, egress. Pure functions of frozen dataclasses; numpy only.
"""
