"""Scenario engine: model + loader, checks, solve actions, runner, guided progress and its
journal; hand-ins (export, handin), grading, grade files and integrity signals; reports."""
