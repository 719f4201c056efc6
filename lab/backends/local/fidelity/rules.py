"""How faithful the local backend is to upstream, one rule at a time: the conformance table.

Each row names an upstream field or behaviour of a kind (Katib Experiment, Training
Operator PyTorchJob and TFJob, KServe InferenceService, Kubeflow Notebook), says whether the
local backend does the same, does it differently (and why that is the better choice for a
learner), or refuses it, and cites the upstream source the rule was read from. The same
table is used three ways, so it cannot drift from the code:

- the local handlers announce every DIFFERENT row a manifest runs into with the row's own
  `announce` text (`announce()` below), and record the ids in an annotation;
- docs/fidelity.md is rendered from it (page.py, through `scripts/fidelity_sweep.py
  render`, with the upstream examples' sweep), and a test fails when the page and a
  re-render differ;
- the fidelity tests exercise every row: DIFFERENT rows must be announced by an example
  manifest, REFUSED rows must be refused naming the row's field, SAME rows name the test
  that replays the upstream rule.

Versions: the lab installs kubeflow/manifests 26.03, i.e. Katib v0.19, Training Operator
v1 (v1.9), KServe v0.16 in Standard (raw deployment) mode, the Notebook controller v1.10.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SAME, DIFFERENT, REFUSED = "same", "different", "refused"
ANNOTATION = "kflab.dev/local-differences"
KINDS = ("Experiment", "PyTorchJob", "TFJob", "InferenceService", "Notebook")
UPSTREAM = {"Experiment": "Katib v0.19", "PyTorchJob": "Training Operator v1.9",
            "TFJob": "Training Operator v1.9",
            "InferenceService": "KServe v0.16 (Standard mode)",
            "Notebook": "Notebook controller v1.10"}


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str          # one of KINDS
    subject: str       # the upstream field or behaviour
    upstream: str      # what upstream does (facts, in our words)
    local: str         # SAME | DIFFERENT | REFUSED
    detail: str        # what the local backend does; why, when it differs or refuses
    source: str        # where upstream decides it: repository, file, function
    announce: str = ""  # DIFFERENT: the line `kflab apply` prints ({name} placeholders)
    test: str = ""     # SAME: the test that replays the upstream rule
    field: str = ""    # REFUSED: the field the error names


KATIB = "kubeflow/katib"
TO = "kubeflow/training-operator"
KSERVE = "kserve/kserve"
NBC = "kubeflow/kubeflow components/notebook-controller"

RULES: tuple[Rule, ...] = (
    # --- Katib Experiment ------------------------------------------------------------------
    Rule("katib.objective.metricStrategies", "Experiment", "objective.metricStrategies defaults",
         "strategies given stay first; the objective and every additional metric without one "
         "get min when minimizing, max when maximizing",
         SAME, "the stored Experiment shows the same list, in the same order",
         f"{KATIB} pkg/apis/controller/experiments/v1beta1/experiment_defaults.go "
         "setDefaultObjective", test="test_metric_strategy_defaults_follow_the_webhook"),
    Rule("katib.objective.value", "Experiment", "a trial's objective value",
         "the objective metric's min, max or latest per its strategy; min and max fall back to "
         "latest when unavailable; the optimal trial and the goal use that value",
         SAME, "status and `kflab get trials` (OBJECTIVE) show the value Katib ranks by",
         f"{KATIB} pkg/controller.v1beta1/experiment/util/status_util.go "
         "getObjectiveMetricValue", test="test_objective_column_is_the_ranked_value"),
    Rule("katib.status.conditions", "Experiment", "completion conditions",
         "checked in order: goal reached; failed + metrics-unavailable trials reach "
         "maxFailedTrialCount; completed trials reach maxTrialCount",
         SAME, "same order, reasons and messages; counts with Go's omitempty",
         f"{KATIB} pkg/controller.v1beta1/experiment/util/status_util.go "
         "UpdateExperimentStatusCondition", test="test_condition_order_and_failed_count"),
    Rule("katib.completion.running-trials", "Experiment", "trials running when it completes",
         "they run to their end (katib#855); counts and currentOptimalTrial keep following "
         "them, the completion condition stays",
         SAME, "`kflab apply` waits for them; they end Succeeded, Failed... as they would",
         f"{KATIB} pkg/controller.v1beta1/experiment/experiment_controller.go Reconcile, "
         "ReconcileExperiment", test="test_running_trials_finish_after_the_goal"),
    Rule("katib.trials.count", "Experiment", "how many trials are created",
         "at most parallelTrialCount active and maxTrialCount minus completed trials, where "
         "completed leaves out MetricsUnavailable ones (so those can push the total past "
         "maxTrialCount)",
         SAME, "the same count, trial by trial",
         f"{KATIB} pkg/controller.v1beta1/experiment/experiment_controller.go ReconcileTrials",
         test="test_trial_count_follows_reconcile_trials"),
    Rule("katib.parallelTrialCount.default", "Experiment", "parallelTrialCount default",
         "3", SAME, "3",
         f"{KATIB} pkg/apis/controller/experiments/v1beta1/experiment_defaults.go "
         "setDefaultParallelTrialCount", test="test_metric_strategy_defaults_follow_the_webhook"),
    Rule("katib.grid.order", "Experiment", "grid: order of the points",
         "optuna 3.3 GridSampler driven by ask/tell: parameters sorted by name, numpy's "
         "RandomState seeded by random_state (unseeded without it) picks among points neither "
         "finished nor running; doubles come from numpy.arange and are written with str()",
         SAME, "the same rule and the same values (0.019999999999999997 included); replayed "
         "against a trace recorded with optuna 3.3.0",
         f"{KATIB} pkg/suggestion/v1beta1/optuna/base_service.py _create_sampler, "
         "internal/search_space.py convert_to_combinations; optuna v3.3.0 "
         "samplers/_grid.py GridSampler", test="test_grid_order_replays_katib_trace"),
    Rule("katib.grid.end", "Experiment", "grid without maxTrialCount",
         "no controller sets ExperimentSuggestionEndReached (UpdateExperimentStatus always "
         "passes false); once every point started, the sampler re-suggests points, and telling "
         "the last one raises in the suggestion service: the Experiment stays Running",
         DIFFERENT, "the Experiment ends Succeeded, ExperimentSuggestionEndReached, after the "
         "last point: a learner gets a finished experiment instead of one that never ends",
         f"{KATIB} pkg/controller.v1beta1/experiment/util/status_util.go "
         "UpdateExperimentStatus; optuna v3.3.0 samplers/_grid.py GridSampler.after_trial",
         announce="grid without maxTrialCount ends here with ExperimentSuggestionEndReached "
                  "after its {size} points; Katib would keep it Running (set maxTrialCount: "
                  "{size} for the same end everywhere)"),
    Rule("katib.algorithm.hyperopt", "Experiment", "random and tpe",
         "served by Katib's hyperopt suggestion service",
         DIFFERENT, "Optuna's RandomSampler / TPESampler (constant_liar) with Katib's settings "
         "names: the same kind of search, other samples than a cluster draws",
         f"{KATIB} manifests katib-config (suggestion-hyperopt); "
         "pkg/suggestion/v1beta1/hyperopt/base_service.py",
         announce="{algorithm} is Optuna's sampler here (Katib uses hyperopt): same settings, "
                  "other samples"),
    Rule("katib.algorithm.goptuna", "Experiment", "cmaes and sobol",
         "served by Katib's goptuna suggestion service",
         DIFFERENT, "Optuna's CmaEsSampler / QMCSampler(sobol): the same kind of search, other "
         "samples than a cluster draws",
         f"{KATIB} pkg/suggestion/v1beta1/goptuna/converter.go toGoptunaSampler",
         announce="{algorithm} is Optuna's sampler here (Katib uses goptuna): same settings, "
                  "other samples"),
    Rule("katib.algorithm.skopt", "Experiment", "bayesianoptimization",
         "served by scikit-optimize's Gaussian-process optimizer",
         DIFFERENT, "Optuna's GPSampler; n_initial_points is its n_startup_trials, "
         "acq_func and acq_optimizer have no equivalent and are listed as ignored",
         f"{KATIB} pkg/suggestion/v1beta1/skopt/base_service.py",
         announce="bayesianoptimization is Optuna's Gaussian-process sampler here (Katib uses "
                  "scikit-optimize)"),
    Rule("katib.cmaes.restart_strategy", "Experiment", "cmaes restart_strategy ipop / bipop",
         "goptuna restarts CMA-ES with a doubled population (ipop, bipop) once the search "
         "has converged; other values than ipop, bipop, none are refused",
         DIFFERENT, "accepted and run without restarts: the pinned Optuna dropped them (4.4) "
         "and a first restart comes only after the search converged -- about 550 trials on "
         "a noise-free 2-parameter problem, thousands with noisy metrics (measured with the "
         "cmaes library); any other value is refused as Katib does",
         f"{KATIB} pkg/suggestion/v1beta1/goptuna/converter.go toGoptunaSampler",
         announce="cmaes restart_strategy {value} runs without restarts here (a restart needs "
                  "hundreds of trials to converge first)"),
    Rule("katib.algorithm.hyperband", "Experiment", "hyperband (eta, r_l, resource_name)",
         "its own suggestion service: validation messages for missing or bad r_l, eta, "
         "resource_name and a parallelTrialCount below eta^s_max; a master bracket of as "
         "many random points as the controller asks for, with int(r) in the resource "
         "parameter, then child brackets of the best of the last bracket with int(r*eta^i); "
         "state kept as algorithm settings between requests",
         SAME, "the same rules, restated (tuning/hyperband.py), driven by the same request "
         "counts; Katib's validation text is the error, naming spec.algorithm."
         "algorithmSettings; a discrete list Katib's service cannot read as integers "
         "(every request fails there, the Experiment stays Running) is refused at apply, "
         "quoting that error",
         f"{KATIB} pkg/suggestion/v1beta1/hyperband/service.py HyperbandService, "
         "HyperBandParam; pkg/controller.v1beta1/suggestion/suggestionclient/"
         "suggestionclient.go SyncAssignments",
         test="test_hyperband_validation_messages_are_katibs"),
    Rule("katib.hyperband.stalled", "Experiment", "hyperband answer of the wrong size",
         "the controller refuses an answer whose length differs from its request ('The "
         "response contains unexpected trials') and asks again on every pass, so the "
         "Experiment stays Running with no new trial (also once hyperband has ended)",
         DIFFERENT, "while trials run, the request is retried as Katib does; with none "
         "running the run ends Failed, its message quoting Katib's error and saying a "
         "cluster would stay Running: a foreground command cannot wait forever",
         f"{KATIB} pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go "
         "SyncAssignments",
         announce="Katib's hyperband answered no usable trials; a cluster keeps this "
                  "Experiment Running with no new trial, here it ends Failed",
         test="test_hyperband_stall_ends_failed_saying_a_cluster_stays_running"),
    Rule("katib.algorithm.pbt", "Experiment", "pbt (population based training)",
         "a long-lived suggestion service keeps the population (n_population, "
         "truncation_threshold, resample_probability) in memory, names the trials, labels "
         "them with generation and parent, and copies a parent's checkpoint folder for its "
         "child on a volume it shares with the trials; the pod webhook mounts each trial's "
         "own folder at suggestion_trial_dir, the same absolute path in every pod",
         REFUSED, "refused: local trial processes share one filesystem, so parallel trials "
         "cannot each find their own checkpoint at the same absolute path unless kflab "
         "rewrote the trial's command, and without the checkpoint hand-over it is not pbt; "
         "use tpe or random (with earlyStopping medianstop to cut bad trials), or a cluster",
         f"{KATIB} pkg/suggestion/v1beta1/pbt/service.py PbtService, PbtJobQueue; "
         "pkg/webhook/v1beta1/pod/inject_webhook.go mutateSuggestionVolume",
         field="spec.algorithm.algorithmName"),
    Rule("katib.algorithm.nas", "Experiment", "enas, darts",
         "neural architecture search, served by Katib's NAS suggestion services and nasConfig",
         REFUSED, "refused with the reason and a way out (a cluster)",
         f"{KATIB} pkg/suggestion/v1beta1/nas",
         field="spec.algorithm.algorithmName"),
    Rule("katib.earlyStopping.medianstop", "Experiment", "earlyStopping medianstop",
         "with min_trials_required succeeded trials, a new trial gets one rule: the mean over "
         "succeeded trials of each one's mean of its first start_step objective values; the "
         "collector compares the trial's best value so far with it once, at the start_step-th "
         "report",
         SAME, "the same rule value (written as Python writes the float) and the same single "
         "check; EarlyStopped trials are told to the sampler with their value, as Katib does",
         f"{KATIB} pkg/earlystopping/v1beta1/medianstop/service.py get_median_value; "
         "cmd/metricscollector/v1beta1/file-metricscollector/main.go updateStopRules",
         test="test_medianstop_replays_the_upstream_example"),
    Rule("katib.collector.stdout", "Experiment", "StdOut and File TEXT collectors",
         "lines mentioning a metric name are matched with the filters (default name=value)",
         SAME, "the same filters and matching",
         f"{KATIB} pkg/metricscollector/v1beta1/file-metricscollector/"
         "file-metricscollector.go parseLogsInTextFormat", test="test_text_collector_filters"),
    Rule("katib.collector.file-json", "Experiment", "File collector, JSON format",
         "one JSON object per line; only string values are metrics ({\"loss\": \"0.3\"}); "
         "a line that is not a JSON object makes the collector fail",
         SAME, "numbers are not read (the trial ends MetricsUnavailable, and its message says "
         "to quote the value); a non-JSON line fails the trial, naming the line",
         f"{KATIB} pkg/metricscollector/v1beta1/file-metricscollector/"
         "file-metricscollector.go parseLogsInJsonFormat",
         test="test_json_collector_reads_strings_only"),
    Rule("katib.collector.file-fresh", "Experiment", "File collector: the file a trial sees",
         "each trial's pod mounts its own empty folder at the file's folder (so /katib exists "
         "and holds no earlier trial's file); the collector reads the whole file once the "
         "trial ends", SAME,
         "each trial starts without the file: where a private mount namespace works, a "
         "folder of the trial's own is mounted at the file's folder for its processes (an "
         "absolute path apart from the manifest's folder, such as /katib); else a missing "
         "folder is created and the previous trial's file removed (outside the manifest's "
         "folder only files trials wrote; any other file there fails the trial, naming "
         "it); the whole file is read at the end",
         f"{KATIB} pkg/webhook/v1beta1/pod/inject_webhook.go; "
         "pkg/metricscollector/v1beta1/file-metricscollector/file-metricscollector.go "
         "CollectObservationLog",
         test="test_file_collector_outside_the_folder_gives_each_trial_its_own_file"),
    Rule("katib.collector.file-parallel", "Experiment", "File collector with parallel trials",
         "each trial's pod has its own filesystem, so trials write the same path in parallel",
         DIFFERENT, "where a private mount namespace works (Linux, as root or with user "
         "namespaces) and the path is absolute and apart from the manifest's folder, each "
         "Job trial gets its own folder mounted there and trials run in parallel, as on "
         "Katib (no note); otherwise trials run one at a time: locally the path would be "
         "one shared file",
         f"{KATIB} pkg/webhook/v1beta1/pod/inject_webhook.go (collector sidecar per pod)",
         announce="trials run one at a time (not {parallel}): the File collector's path is "
                  "one shared file here"),
    Rule("katib.collector.custom", "Experiment", "Custom collector (collector.kind: Custom)",
         "the customCollector container runs as a sidecar in each trial pod and must report "
         "the metrics itself to katib-db-manager over gRPC (ReportObservationLog); Katib "
         "reads nothing from that container's stdout",
         REFUSED, "refused: there is no katib-db-manager locally, and reading the sidecar's "
         "stdout instead would report metrics Katib never records; print name=value lines "
         "from the training container (StdOut) or write them to a File",
         f"{KATIB} pkg/webhook/v1beta1/pod/inject_webhook.go getMetricsCollectorContainer; "
         "examples/v1beta1/metrics-collector/custom-metrics-collector.yaml",
         field="spec.metricsCollectorSpec.collector.kind"),
    Rule("katib.collector.tfevent", "Experiment", "TensorFlowEvent collector",
         "after the training process ends, every file under the collector's directory "
         "(default /var/log/katib/tfevent/) is loaded with TensorBoard's EventAccumulator; a "
         "metric `a/b` takes the tags starting with `b` in folders ending with `a`, a bare "
         "name the tags starting with it anywhere; tensor summaries as str() of their array, "
         "then simple values as str() of the float; no objective: one 'unavailable' log only; "
         "latest = the last log of the latest second",
         SAME, "the same files, tags, value strings and order, read with TensorBoard's own "
         "loader (the tf extra; without it apply says to install it); each trial starts with "
         "an empty folder (created if missing; files earlier trials left are removed, any "
         "other file fails the trial, naming it); the stored "
         "Experiment gets Katib's defaults; kind must be Directory, the path absolute and the "
         "format empty, as the webhook says",
         f"{KATIB} pkg/metricscollector/v1beta1/tfevent-metricscollector/tfevent_loader.py "
         "TFEventFileParser.parse_summary, MetricsCollector.parse_file; "
         "cmd/metricscollector/v1beta1/tfevent-metricscollector/main.py; "
         "pkg/apis/controller/experiments/v1beta1/experiment_defaults.go "
         "setDefaultMetricsCollector; pkg/webhook/v1beta1/experiment/validator/validator.go "
         "validateMetricsCollector; pkg/controller.v1beta1/trial/trial_controller_util.go "
         "getMetrics",
         test="test_tfevent_collector_reads_what_katibs_loader_reads"),
    Rule("katib.collector.tfevent-parallel", "Experiment",
         "TensorFlowEvent collector with parallel trials",
         "each trial pod mounts its own empty folder at the collector's directory",
         DIFFERENT, "trials run one at a time: locally the directory is one shared folder",
         f"{KATIB} pkg/webhook/v1beta1/pod/inject_webhook.go getMountPath",
         announce="trials run one at a time (not {parallel}): the TensorFlowEvent "
                  "collector's directory is one shared folder here"),
    Rule("katib.collector.tfevent-earlystop", "Experiment",
         "earlyStopping with the TensorFlowEvent collector",
         "the webhook passes -stop-rule flags to every collector; the TensorFlowEvent "
         "collector's main.py defines none (a TODO), so its sidecar exits on them",
         REFUSED, "refused at apply, naming earlyStopping: remove it, or report the metric "
         "with StdOut or File, which apply median stopping",
         f"{KATIB} cmd/metricscollector/v1beta1/tfevent-metricscollector/main.py "
         "parse_options; pkg/webhook/v1beta1/pod/inject_webhook.go getMetricsCollectorArgs",
         field="spec.earlyStopping"),
    Rule("katib.collector.others", "Experiment",
         "Prometheus, Push and None collectors",
         "sidecars and services of their own", REFUSED,
         "refused: print name=value lines (StdOut) or write a File",
         f"{KATIB} pkg/metricscollector/v1beta1",
         field="spec.metricsCollectorSpec.collector.kind"),
    Rule("katib.trialSpec.metadata", "Experiment",
         "${trialSpec.Labels[k]} and ${trialSpec.Annotations[k]}",
         "read from the trial spec's own metadata; a key it lacks makes the controller fail "
         "every trial's creation (illegal reference of trial metadata)", SAME,
         "the same values; a missing key is refused at apply with Katib's error (a cluster "
         "would create no trial)",
         f"{KATIB} pkg/controller.v1beta1/experiment/manifest/generator.go applyParameters",
         test="test_trial_spec_metadata_references_read_the_trial_spec"),
    Rule("katib.strings", "Experiment",
         "feasibleSpace min, max, step and list; algorithm and earlyStopping settings values",
         "typed string in the CRD: the API server refuses a YAML number there", SAME,
         "refused the same way, naming the field, with the fix (quote it)",
         f"{KATIB} pkg/apis/controller/experiments/v1beta1/experiment_types.go "
         "FeasibleSpace, AlgorithmSetting",
         test="test_a_number_where_katib_takes_a_string_says_so"),
    Rule("katib.reapply", "Experiment", "applying an unchanged Experiment again",
         "kubectl apply says unchanged; nothing restarts", SAME,
         "`kflab apply` says unchanged and no trial re-runs (an interrupted run runs again)",
         "kubernetes kubectl apply (an unchanged object is not patched)",
         test="test_applying_the_same_experiment_again_changes_nothing"),
    Rule("katib.resumePolicy", "Experiment", "resumePolicy LongRunning / FromVolume",
         "an Experiment that Succeeded by reaching maxTrialCount restarts when maxTrialCount "
         "is raised: Restarting condition, its trials kept, more trials up to the new count; "
         "only parallelTrialCount, maxTrialCount and maxFailedTrialCount may change, and "
         "maxTrialCount must exceed status.trials", SAME,
         "the same restart, conditions and refusal (not for hyperband, whose state lives in "
         "its service: a changed hyperband Experiment runs afresh)",
         f"{KATIB} pkg/controller.v1beta1/experiment/experiment_controller.go Reconcile; "
         "util/status_util.go IsCompletedExperimentRestartable; "
         "pkg/webhook/v1beta1/experiment/validator/validator.go ValidateExperiment",
         test="test_more_trials_restart_the_experiment_and_keep_its_trials"),
    Rule("katib.trialTemplate.command", "Experiment", "trial container without command",
         "the image's entrypoint runs", REFUSED,
         "an image kflab runs as a process: refused, the entrypoint is unknown locally (the "
         "error shows the command line to add); any other image runs in its container "
         "(Podman or Docker), entrypoint included",
         "kubernetes Container.command semantics",
         field="spec.trialTemplate.trialSpec.spec.template.spec.containers[0].command"),
    Rule("katib.trialSpec.trainjob", "Experiment", "a TrainJob trial (trainer.kubeflow.org)",
         "the trial controller creates the TrainJob; the webhook defaults its success and "
         "failure conditions to the TrainJob's Complete and Failed, and its primary pod to "
         "node index 0 (replicated job node), where the collector reads the container "
         "named by primaryContainerName (the runtime's node container)",
         SAME, "every node runs as the local TrainJob runs it (numNodes, PET_* env); the "
         "trial ends with the TrainJob's Complete or Failed condition and its metrics come "
         "from node 0; a primaryContainerName other than node is refused (Katib's pod "
         "webhook would find no such container)",
         f"{KATIB} pkg/apis/controller/experiments/v1beta1/experiment_defaults.go "
         "setDefaultTrialTemplate, constants.go DefaultTrainJobSuccessCondition, "
         "DefaultTrainJobPrimaryPodLabels; examples/v1beta1/kubeflow-trainer/"
         "trainjob-pytorch.yaml", test="test_trainjob_trial_runs_every_node_and_reads_node_0"),
    Rule("katib.trialSpec.kind", "Experiment",
         "trial kinds other than Job, PyTorchJob, TFJob, TrainJob (MPIJob, XGBoostJob, "
         "Argo Workflow, Tekton PipelineRun)",
         "the trial controller creates any kind named in katib-config's trialResources; "
         "that kind's own controller runs it",
         REFUSED, "refused naming the kind: the local backend runs trials of kind Job, "
         "PyTorchJob, TFJob or TrainJob; write the trial as one of those running the same "
         "command, or run it on a cluster",
         f"{KATIB} manifests/v1beta1/installs/katib-standalone/katib-config.yaml "
         "trialResources; pkg/controller.v1beta1/trial/trial_controller.go",
         field="spec.trialTemplate.trialSpec.kind"),
    Rule("katib.trialSpec.job", "Experiment", "a PyTorchJob or TFJob trial",
         "the Training Operator runs every replica with its environment (WORLD_SIZE, RANK, "
         "MASTER_ADDR... or TF_CONFIG); the trial ends with the job's Succeeded or Failed "
         "condition; the metrics collector sits in the primary pod only, the Master "
         "(default primaryPodLabels training.kubeflow.org/job-role: master)", SAME,
         "every replica runs under the local training supervisor with the operator's "
         "environment and restart rules; the Master's output is the trial's log and "
         "metrics, the other replicas' logs lie beside it; the trial fails with the job's "
         "own message (before: the primary container ran alone, not distributed)",
         f"{KATIB} pkg/apis/controller/experiments/v1beta1/constants.go "
         "DefaultKubeflowJobPrimaryPodLabels; pkg/controller.v1beta1/trial/"
         "trial_controller.go UpdateTrialStatusCondition",
         test="test_pytorchjob_trial_runs_every_replica_and_reads_the_master"),
    Rule("katib.trialTemplate.configMap", "Experiment", "trialTemplate.configMap",
         "the template is read from a ConfigMap", REFUSED, "refused: inline it as trialSpec",
         f"{KATIB} pkg/controller.v1beta1/experiment/manifest/generator.go",
         field="spec.trialTemplate.configMap"),
    Rule("katib.trialTemplate.cluster-fields", "Experiment",
         "image, resources, volumes, restartPolicy and other pod fields",
         "shape the trial's pod", DIFFERENT,
         "accepted and listed once as ignored: a trial is a process running the command",
         "kubernetes PodSpec",
         announce="ignored here (cluster only): {fields}"),
    Rule("katib.maxTrialCount.required", "Experiment",
         "maxTrialCount absent (not grid, no goal)",
         "the experiment runs until stopped", REFUSED,
         "refused: locally it would never end", f"{KATIB} experiment_controller.go "
         "ReconcileTrials", field="spec.maxTrialCount"),
    # --- Training Operator PyTorchJob ------------------------------------------------------
    Rule("pytorch.defaults", "PyTorchJob", "defaults",
         "replicas 1, restartPolicy OnFailure, cleanPodPolicy None, nprocPerNode auto, "
         "port pytorchjob-port 23456, replica types camel-cased",
         SAME, "the stored job shows the same defaults",
         f"{TO} pkg/apis/kubeflow.org/v1/pytorch_defaults.go SetDefaults_PyTorchJob",
         test="test_defaults_written_like_the_webhook"),
    Rule("pytorch.env", "PyTorchJob", "environment of each replica",
         "MASTER_ADDR/PORT, WORLD_SIZE, RANK, PET_* (torchrun), PYTHONUNBUFFERED",
         SAME, "the same variables; addresses are 127.0.0.1 and free loopback ports",
         f"{TO} pkg/controller.v1/pytorch/envvar.go setPodEnv",
         test="test_master_and_workers_rank_and_world_size"),
    Rule("pytorch.command", "PyTorchJob", "container without command",
         "the image's entrypoint runs (with args)", REFUSED,
         "an image kflab runs as a process: refused, the entrypoint is unknown locally (the "
         "error shows the command line to add and keeps the args); any other image runs in "
         "its container (Podman or Docker), entrypoint included",
         "kubernetes Container.command semantics",
         field="spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command"),
    Rule("pytorch.valueFrom", "PyTorchJob", "env valueFrom (secrets, field refs)",
         "resolved by the kubelet", REFUSED, "refused: give a literal value",
         "kubernetes EnvVarSource",
         field="spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[0].valueFrom"),
    Rule("pytorch.gpus", "PyTorchJob", "nvidia.com/gpu with other workloads running",
         "the scheduler gives a pod GPUs no other pod holds, or keeps it Pending (0/1 nodes "
         "are available: 1 Insufficient nvidia.com/gpu.)", SAME,
         "one allocation for jobs, trials and notebooks, by GPU UUID as the device plugin "
         "names devices: other GPUs, or the job waits with the scheduler's message; a GPU "
         "stays held while any process of its holder runs; the kflab.dev/gpus annotation "
         "shows which it holds",
         "kubernetes scheduler NodeResourcesFit; NVIDIA device plugin",
         test="test_two_jobs_get_two_gpus"),
    Rule("pytorch.reapply", "PyTorchJob", "applying an unchanged PyTorchJob again",
         "kubectl apply says unchanged; a finished job is not run again", SAME,
         "`kflab apply` says unchanged and no replica re-runs (an interrupted run runs "
         "again); a changed manifest, or delete then apply, runs it",
         "kubernetes kubectl apply (an unchanged object is not patched)",
         test="test_an_unchanged_job_applied_again_does_not_run_again"),
    Rule("pytorch.cluster-fields", "PyTorchJob",
         "image, resources except GPUs, volumes, schedulingPolicy, ttlSecondsAfterFinished",
         "shape pods and scheduling", DIFFERENT,
         "accepted; run policies without local effect are listed in the "
         "kflab.dev/ignored-locally annotation and announced",
         f"{TO} pkg/controller.v1/common/job.go ReconcileJobs",
         announce="ignored here (cluster only): {fields}"),
    # --- Training Operator TFJob -----------------------------------------------------------
    Rule("tfjob.defaults", "TFJob", "defaults",
         "replicas 1, restartPolicy Never, cleanPodPolicy None, successPolicy \"\", port "
         "tfjob-port 2222, replica types camel-cased (ps -> PS); at most one Chief or Master",
         SAME, "the stored job shows the same defaults; a Chief beside a Master is refused as "
         "the webhook refuses it",
         f"{TO} pkg/apis/kubeflow.org/v1/tensorflow_defaults.go SetDefaults_TFJob; "
         "pkg/webhooks/tensorflow/tfjob_webhook.go validateTFReplicaSpecs",
         test="test_webhook_defaults_and_case_insensitive_types"),
    Rule("tfjob.tf_config", "TFJob", "TF_CONFIG of each replica",
         "only for distributed jobs (more than one replica): the cluster (every replica type "
         "of the spec, lower-cased, replicas in index order at their Service's "
         "HOST:tfjob-port), the task (type, index) and environment cloud, keys sorted as Go "
         "writes them; sparse (ps and the task's own worker) with enableDynamicWorker",
         SAME, "the same JSON, byte for byte, with 127.0.0.1 addresses",
         f"{TO} pkg/controller.v1/tensorflow/tensorflow.go genTFConfigJSONStr, genClusterSpec; "
         "tfjob_controller.go SetClusterSpec",
         test="test_tf_config_is_the_operators_json_with_local_addresses"),
    Rule("tfjob.success", "TFJob", "when the job succeeds or fails",
         "with a Chief or Master: when it succeeds; without: when Worker 0 succeeds (every "
         "Worker with successPolicy AllWorkers); a replica failing for good fails the job, "
         "except Workers with enableDynamicWorker",
         SAME, "the same rules and messages (TFJob NS/NAME successfully completed.)",
         f"{TO} pkg/controller.v1/tensorflow/tfjob_controller.go UpdateJobStatus, "
         "IsWorker0Completed", test="test_success_rules"),
    Rule("tfjob.ports", "TFJob", "tfjob-port",
         "every replica listens on the same port (2222 by default) of its own pod", DIFFERENT,
         "the replicas share 127.0.0.1 (in the job's own network namespace), so each gets a "
         "free port of its own; TF_CONFIG names them",
         f"{TO} pkg/controller.v1/tensorflow/util.go GetPortFromTFJob",
         announce="each replica listens on a free port of its own on 127.0.0.1 (TF_CONFIG "
                  "names them), not on the shared port {port}"),
    Rule("tfjob.command", "TFJob", "container without command",
         "the image's entrypoint runs (with args)", REFUSED,
         "an image kflab runs as a process: refused, the entrypoint is unknown locally (the "
         "error shows the command line to add and keeps the args); any other image runs in "
         "its container (Podman or Docker), entrypoint included",
         "kubernetes Container.command semantics",
         field="spec.tfReplicaSpecs.Worker.template.spec.containers[0].command"),
    Rule("tfjob.valueFrom", "TFJob", "env valueFrom (secrets, field refs)",
         "resolved by the kubelet", REFUSED, "refused: give a literal value",
         "kubernetes EnvVarSource",
         field="spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0].valueFrom"),
    Rule("tfjob.reapply", "TFJob", "applying an unchanged TFJob again",
         "kubectl apply says unchanged; a finished job is not run again", SAME,
         "`kflab apply` says unchanged and no replica re-runs (an interrupted run runs "
         "again); a changed manifest, or delete then apply, runs it",
         "kubernetes kubectl apply (an unchanged object is not patched)",
         test="test_an_unchanged_job_applied_again_does_not_run_again"),
    Rule("tfjob.cluster-fields", "TFJob",
         "image, resources except GPUs, volumes, schedulingPolicy, ttlSecondsAfterFinished",
         "shape pods and scheduling", DIFFERENT,
         "accepted; run policies without local effect are listed in the "
         "kflab.dev/ignored-locally annotation and announced",
         f"{TO} pkg/controller.v1/common/job.go ReconcileJobs",
         announce="ignored here (cluster only): {fields}"),
    # --- KServe InferenceService -----------------------------------------------------------
    Rule("kserve.runtime.selection", "InferenceService", "which serving runtime runs a model",
         "runtimes supporting the format (auto-select) and the protocol, highest priority "
         "first: sklearn/xgboost with v1 go to kserve-sklearnserver / kserve-xgbserver, with "
         "v2 to kserve-mlserver (priority 2)",
         SAME, "the same choice from the same runtime table (checked against the upstream "
         "manifests); the chosen runtime's file rule decides which file loads",
         f"{KSERVE} pkg/apis/serving/v1beta1/predictor_model.go GetSupportingRuntimes, "
         "sortSupportedRuntimeByPriority; config/runtimes (ClusterServingRuntimes)",
         test="test_runtime_selection_matches_kserve"),
    Rule("kserve.runtime.files", "InferenceService", "which model file a runtime loads",
         "kserve sklearn/xgb servers: exactly one file with the format's suffix in the "
         "folder; MLServer: model-settings.json's parameters.uri if present, else model.bst / "
         "model.json / model.ubj (xgboost), model.joblib / model.pickle / model.pkl (sklearn)",
         SAME, "the same rule per runtime: a folder with model.bst and model-settings.json "
         "loads on MLServer and fails on xgbserver, as upstream",
         f"{KSERVE} python/xgbserver/xgbserver/model.py XGBoostModel.load, "
         "python/sklearnserver/sklearnserver/model.py SKLearnModel.load; SeldonIO/MLServer "
         "mlserver/utils.py get_model_uri", test="test_model_files_per_runtime"),
    Rule("kserve.runtime.mlserver", "InferenceService", "the kserve-mlserver runtime",
         "MLServer 1.5 serves the model: V2 only, output tensors named predict",
         DIFFERENT, "KServe's own Python server loads the file MLServer would load and answers "
         "V2 (outputs named output-0); `kflab predict` refuses V1 for it as MLServer would; "
         "MLServer is not installed locally",
         f"{KSERVE} config/runtimes kserve-mlserver; SeldonIO/MLServer runtimes/xgboost",
         announce="runtime kserve-mlserver (KServe's choice for {format} with protocol v2) is "
                  "served here by KServe's Python server with MLServer's file rule ({file}); "
                  "V2 only"),
    Rule("kserve.protocol.grpc", "InferenceService", "protocolVersion grpc-v2 for sklearn/xgboost",
         "no sklearn or xgboost runtime lists grpc-v2, so no runtime is found and the "
         "InferenceService fails",
         DIFFERENT, "served, with gRPC on loopback beside REST, so the protocol can be tried "
         "locally; the announcement says a cluster would not serve it",
         f"{KSERVE} predictor_model.go GetSupportingRuntimes (IsProtocolVersionSupported)",
         announce="protocolVersion grpc-v2: served here, but KServe has no {format} runtime "
                  "for grpc-v2 and would fail to find one on a cluster"),
    Rule("kserve.runtime.none", "InferenceService", "a format or version no runtime supports",
         "the InferenceService fails: no runtime found", REFUSED,
         "refused at apply with the runtimes that exist (local formats: sklearn, xgboost, "
         "lightgbm)",
         f"{KSERVE} predictor_model.go GetSupportingRuntimes",
         field="spec.predictor.model.modelFormat.name"),
    Rule("kserve.rollout", "InferenceService", "a new version that fails to load",
         "the Deployment's rolling update keeps the old pod serving until a new one is "
         "ready; Ready stays True while the old one is available, modelStatus shows target "
         "FailedToLoad / BlockedByFailedLoad; after progressDeadlineSeconds (600) Ready turns "
         "False (ProgressDeadlineExceeded) while the old pod still serves",
         SAME, "the old server keeps serving; the same Ready, modelStatus and deadline",
         f"{KSERVE} pkg/apis/serving/v1beta1/inference_service_status.go PropagateRawStatus, "
         "UpdateModelRevisionStates; reconcilers/deployment/deployment_reconciler.go "
         "setDefaultDeploymentSpec", test="test_bad_rollout_keeps_the_old_server"),
    Rule("kserve.rollout.url", "InferenceService", "the URL across a rollout",
         "stable: the Service name", DIFFERENT,
         "the new server listens on a new loopback port, so status.url changes when a "
         "rollout completes (kflab predict and checks read it from the status)",
         f"{KSERVE} reconcilers/service",
         announce="rolled out on a new local port: {url} (a cluster keeps the same URL)",
         test="test_bad_rollout_keeps_the_old_server"),
    Rule("kserve.cluster-fields", "InferenceService",
         "replicas, autoscaling, canary traffic, resources, scheduling, the model container's "
         "fields", "shape pods, scaling and traffic", DIFFERENT,
         "accepted; listed once at apply as ignored: one server, no autoscaler",
         f"{KSERVE} pkg/apis/serving/v1beta1/component.go ComponentExtensionSpec",
         announce="ignored here (cluster only): {fields}"),
    Rule("kserve.mlserver.implementation", "InferenceService",
         "model-settings.json's implementation",
         "MLServer 1.5 imports the class the file names (the file wins over KServe's "
         "MLSERVER_MODEL_IMPLEMENTATION); it has no mlserver.models module, which KServe's "
         "own xgboost and sklearn v2 sample files name, so they fail to load", SAME,
         "the same outcome, with MLServer's reason and the fix (mlserver_xgboost.XGBoostModel, "
         "or no implementation key)",
         "SeldonIO/MLServer 1.5.0 mlserver/settings.py ModelSettings; "
         "mlserver/repository/load.py load_model_settings",
         test="test_model_files_per_runtime"),
    Rule("kserve.storage-spec", "InferenceService", "the storage: block (StorageSpec)",
         "the storage initializer reads a key of the storage-config Secret and a path in "
         "that bucket", REFUSED,
         "refused naming the block: no cluster credentials locally; give storageUri",
         f"{KSERVE} pkg/apis/serving/v1beta1/predictor.go StorageSpec",
         field="spec.predictor.model.storage"),
    Rule("kserve.components", "InferenceService", "transformer, explainer",
         "run their own images", REFUSED,
         "refused (a custom predictor, spec.predictor.containers, runs in its container "
         "with Podman or Docker)",
         f"{KSERVE} pkg/apis/serving/v1beta1/inference_service.go",
         field="spec.transformer"),
    # --- Kubeflow Notebook -----------------------------------------------------------------
    Rule("notebook.prefix", "Notebook", "where the server answers",
         "the first container gets NB_PREFIX=/notebook/NAMESPACE/NAME; Kubeflow's images serve "
         "JupyterLab under it", SAME,
         "JupyterLab serves under the same path (127.0.0.1, a free port)",
         f"{NBC} controllers/notebook_controller.go setPrefixEnvVar",
         test="test_a_notebook_serves_its_folder_on_loopback_with_a_private_token"),
    Rule("notebook.status", "Notebook", "status",
         "the pod's conditions mirrored, readyReplicas of the StatefulSet, the state of the "
         "container named like the Notebook", SAME,
         "the same fields from the server process (terminated, with its last log lines, when "
         "it died); valid against the upstream CRD",
         f"{NBC} controllers/notebook_controller.go createNotebookStatus, PodCondToNotebookCond",
         test="test_a_server_that_dies_is_reported_terminated"),
    Rule("notebook.image", "Notebook", "the notebook image",
         "the image's server runs (Kubeflow's: JupyterLab without a token, behind Kubeflow's "
         "login)", DIFFERENT,
         "JupyterLab from this installation serves the manifest's folder, with a token kept "
         "in the state folder (0600); its kernels are this installation's Python",
         f"{NBC} controllers/notebook_controller.go generateStatefulSet",
         announce="JupyterLab from this installation serves this folder on 127.0.0.1, with a "
                  "token (the image {value} runs on a cluster)"),
    Rule("notebook.cpu", "Notebook", "resources.limits.cpu",
         "a CPU quota (CFS) for the pod", DIFFERENT,
         "the server and its kernels run on that many CPUs, rounded up (CPU affinity)",
         "kubernetes container resources (kubelet CPU quota)",
         announce="cpu limit {value}: the server and its kernels may use {size} CPU(s) here "
                  "(a set of CPUs, not a quota)"),
    Rule("notebook.cluster-fields", "Notebook",
         "memory limit, requests, volumes, volumeMounts, ports, command, scheduling and the "
         "other pod fields", "shape the pod", DIFFERENT,
         "accepted; listed once at apply and in the kflab.dev/ignored-locally annotation",
         f"{NBC} controllers/notebook_controller.go generateStatefulSet",
         announce="ignored here (cluster only): {fields}"),
    Rule("notebook.gpus", "Notebook", "more GPUs than the machine has",
         "the pod stays Pending until a node has them", REFUSED,
         "refused before anything starts (locally no GPU will appear)",
         "kubernetes scheduling of extended resources (nvidia.com/gpu)",
         field="spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"),
)

BY_ID: dict[str, Rule] = {r.id: r for r in RULES}


def text(rule_id: str, values: Mapping[str, str] | None = None) -> str:
    """A DIFFERENT rule's announcement, filled in."""
    rule = BY_ID[rule_id]
    body = rule.announce.format(**(values or {}))
    return f"note: {body} (differs from {UPSTREAM[rule.kind]}, see docs/fidelity.md)"


def announce(backend: Any, obj: dict[str, Any],
             found: Iterable[tuple[str, Mapping[str, str]]]) -> list[str]:
    """Print each difference once and record their ids on the object (an annotation)."""
    ids = []
    for rule_id, values in found:
        backend.emit({"event": "message", "text": text(rule_id, values), "rule": rule_id})
        ids.append(rule_id)
    if ids:
        notes = obj["metadata"].setdefault("annotations", {})
        notes[ANNOTATION] = ",".join(dict.fromkeys(ids))
    return ids
