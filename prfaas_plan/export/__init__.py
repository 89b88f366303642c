"""`prfaas-plan export`: a plan written as the configuration of a serving stack (llm-d, NVIDIA
Dynamo, plain Kubernetes), with a note of what the stack cannot express and what that costs.

plan_source.py reads the plan (from a scenario or a reviewed `optimize -f json` document),
manifest.py holds what every target shares (names, labels, provenance comments, the atomic
directory write), one module per target builds its documents, stack_cost.py evaluates what a
stack will actually run, and readback.py reads an exported directory back. Units: SI and tokens
inside; a stack's own unit (llm-d counts prompt characters) only in its documents.
"""
