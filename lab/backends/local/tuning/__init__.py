"""Katib Experiments and Trials on the local backend, with Optuna as the suggestion service."""
