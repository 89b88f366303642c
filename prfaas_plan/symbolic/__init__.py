"""Symbolic work (sympy, imported inside functions): the model's equations as expressions, the
balance condition and the elasticities of Λ_max derived from them."""
