"""AION-shaped models: the CPU stand-in and the AION-1 adapter."""
