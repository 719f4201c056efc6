"""Imported first in the task fork server: kfp's executor without kfp's API client.

A task runs with `_KFP_RUNTIME=true`, as the command kfp compiles sets it
(`_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main`): kfp/__init__.py then skips importing
kfp.client (and with it the Kubernetes client), which no component needs."""

import os

os.environ["_KFP_RUNTIME"] = "true"

import kfp.dsl.executor_main  # noqa: F401 - the point of this module
