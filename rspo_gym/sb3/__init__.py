"""Stable-Baselines3 support: env adapters and the DRRN policy."""
