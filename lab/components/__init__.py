"""The lab's installable components: pinned versions, install order, readiness, footprint.

The data lives in manifests/versions.yaml, shared with the Ansible roles, so the installer
and this package can never disagree about what is installed or in which order."""
