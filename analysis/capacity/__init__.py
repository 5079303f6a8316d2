"""Representational capacity: cosine statistics and epsilon, the capacity formulas, packing simulations."""
