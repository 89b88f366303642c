"""prfaas-plan: capacity planner for Prefill-as-a-Service (PrfaaS) + PD-disaggregated serving.

The analytical model follows Qin et al., "Prefill-as-a-Service: KVCache of Next-Generation
Models Could Go Cross-Datacenter", arXiv 2604.15039. Inside the package every quantity is in
SI units (seconds, bytes, bytes/s, tokens, requests/s); conversions live in `units`.
"""

__version__ = "0.1.0"
