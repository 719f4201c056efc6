"""Runs Ansible for the lab: inventory, extra vars, events -> progress."""
