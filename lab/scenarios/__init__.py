"""Scenario engine: model + loader, checks, solve actions, runner, progress and reports."""
