"""Operators: one module per concept (input, stateless, arrange, join, reduce, iterate, capture)."""
