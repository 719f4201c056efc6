"""Every limit kflab puts on user input, in one place, each with the reason for its value.

A limit refuses an absurd value before it costs memory, disk or processes: an alias bomb, a
`replicas: 1000000000000`, a grid with more points than atoms. Errors name the limit
(`limit(...)` below writes the sentence), and docs/limits.md lists them for users.
"""

from __future__ import annotations

# --- files a user gives (manifests, scenario.yaml, lab.yaml, kubeconfigs, request bodies) ---

# The Kubernetes API server refuses request bodies over 3 MiB; no manifest kflab reads is
# legitimately bigger, so a bigger file is a mistake (or an attack) caught before parsing.
MAX_FILE_BYTES = 3 * 1024 * 1024
# Prediction request bodies carry tensors (an image is a few MB as JSON numbers).
MAX_BODY_BYTES = 32 * 1024 * 1024
# Nesting of mappings and lists. A PodSpec inside a PyTorchJob inside a Katib trial template
# is about 15 levels deep; 100 leaves room for any real manifest and keeps recursion shallow.
MAX_DEPTH = 100
# Values in one file after YAML aliases and merge keys are expanded. A large real manifest
# has a few thousand; a "billion laughs" file asks for billions. Counted without copying.
MAX_NODES = 200_000
# Kubernetes integers are at most 64-bit (most CRD counts are 32-bit, checked per field).
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

# --- workloads on the local backend: each replica or trial is a process on this machine ---

# Processes one PyTorchJob may start (replicas x nprocPerNode). A workstation runs a handful;
# 64 is beyond any lab and far below what would exhaust pids or ports.
MAX_LOCAL_PROCESSES = 64
# Trials an Experiment may run at once, and in total.
MAX_PARALLEL_TRIALS = 64
MAX_TRIAL_COUNT = 10_000
# Points a grid search may enumerate (grid is built in memory before the first trial).
MAX_GRID_POINTS = 100_000
# Search-space size: parameters per Experiment and values in one categorical/discrete list.
MAX_PARAMETERS = 100
MAX_FEASIBLE_VALUES = 10_000


def limit(what: str, value: object, maximum: object, name: str) -> str:
    """The sentence every limit error uses, so users can find the limit by its name."""
    return f"{what} {value} is over kflab's limit of {maximum} ({name}, see docs/limits.md)"

# --- hand-ins for grading (a student's folder or archive, read on the instructor's machine) ---

# A lab's hand-in (work folder and run records) is small: measured, pipeline-classifiers
# 0.8 MB in 61 files, katib-hpo 0.13 MB, kserve-serving 0.06 MB. 1 GiB leaves room for a
# student's own data and models and refuses a disk-filling archive before it is unpacked.
MAX_HANDIN_BYTES = 1024 * 1024 * 1024
# Files in one hand-in: a lab makes hundreds; an archive of millions of empty files is a bomb.
MAX_HANDIN_FILES = 50_000

# --- files a learner's work leaves, read back by kflab (records, journals, grades, rosters) ---

# One record of a local resource (a PipelineRun with its task details, an Experiment with
# its trials) is kilobytes to a few MB; 64 MiB is beyond any honest record, and bounds what a
# hand-in's edited record can make kflab hold in memory.
MAX_RECORD_BYTES = 64 * 1024 * 1024
# The export manifest of a hand-in and an owner record: a few kB each.
MAX_MANIFEST_BYTES = 1024 * 1024
# A journal: one short line per check, hint or solve; a year of daily work is a few hundred kB.
MAX_JOURNAL_BYTES = 8 * 1024 * 1024
# A grade.json: every check of every step with what it observed is well under 1 MB.
MAX_GRADE_BYTES = 16 * 1024 * 1024
# A work file a check reads (`contains`): the learner's own text output or code.
MAX_CHECKED_FILE_BYTES = 64 * 1024 * 1024
# A class roster: one short row per student; 1 MiB is tens of thousands of students.
MAX_ROSTER_BYTES = 1024 * 1024
# Folders in one path of a hand-in: a lab's deepest (pipeline-root/ns/run/task/artifact) is
# under 15; 64 refuses an archive built to exhaust path lengths before a folder is made.
MAX_HANDIN_DEPTH = 64

# --- notebooks compiled to pipelines (`kflab notebook compile`) ---

# An .ipynb holds its cells' outputs too (plots as base64): course notebooks with figures are
# a few MB; 32 MiB refuses a file no one would hand to a compiler before it is parsed.
MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024
# Cells and steps: a long lab notebook has ~200 cells; every step is a pipeline task (a pod on
# a cluster), and KFP's UI stops being readable long before 100.
MAX_NOTEBOOK_CELLS = 5_000
MAX_PIPELINE_STEPS = 100
# Code is embedded in the compiled pipeline (and, on a cluster, in the pipeline spec that the
# KFP API stores): 1 MiB of code per step is far beyond a notebook cell's reasonable size.
MAX_STEP_CODE_BYTES = 1024 * 1024
# Step names become component and task names (DNS labels): short enough for pod names.
MAX_STEP_NAME = 40

# --- compiled pipelines run on the local backend (`kflab pipeline run FILE.yaml`) ---

# Iterations of one dsl.ParallelFor: each is a thread and a task folder here (a pod on a
# cluster); the labs loop over a handful, a sweep over a few hundred.
MAX_PARALLELFOR_ITEMS = 1_000
# A dsl.If condition the compiler writes is one comparison per branch (Elif chains repeat
# the earlier ones negated): a few hundred characters. 64 KiB is beyond any real pipeline.
MAX_CONDITION_CHARS = 64 * 1024

# --- the local KFP API (`kflab ui`) ---

# A list's `filter` is a JSON v2beta1.Filter of a few predicates (kfp.Client's are under 200
# characters); 64 KiB is beyond any real one and keeps a hostile query string cheap to refuse.
MAX_FILTER_CHARS = 64 * 1024
# Filter -> predicates -> Predicate -> string_values -> values is 5 levels deep.
MAX_FILTER_DEPTH = 8
