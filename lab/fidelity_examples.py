"""The upstream examples, run unmodified through `kflab apply`: what each one gives.

Rendered into docs/fidelity.md by lab/fidelity.py. Verdicts:
- exact: the outcome a cluster gives (a run to the same end, or the same refusal);
- refused: refused at apply, naming the upstream feature and what to do instead;
- needs its image: the manifest runs, but the program it starts lives in the example's
  container image (or downloads a dataset), which a machine without a cluster does not
  have; the trial or replica fails naming the missing file or the download, as the same
  manifest would on a cluster with that image missing -- not a wrong result, not exact.

The reviewers run the examples with the containers' files available, and so does
scripts/upstream_examples.py: it lays the image's files (from the same tree's Dockerfile)
at their image paths in a private mount namespace and writes the dataset offline. A row
it verified says "exact with the image's files and an offline dataset", with what the run
gave; the others keep the verdict they had.

Upstream trees: kubeflow/katib v0.19.0 examples/v1beta1, kubeflow/training-operator
v1.9.0 examples (the last tree with the v1 examples), kserve/kserve v0.16.0
docs/samples/v1beta1. KServe's samples point at gs:// buckets: their model files come from
the sample folder where it ships one (xgboost, sklearn v2), else a model of the same kind
trained on iris (sklearn v1, lightgbm), put in the local mirror ($KFLAB_MODEL_MIRROR).
"""

from __future__ import annotations

EXACT, REFUSED, IMAGE = "exact", "refused", "needs its image"

# (example, verdict, reason)
EXAMPLES: tuple[tuple[str, str, str], ...] = (
    # --- Katib v0.19.0, examples/v1beta1 ----------------------------------------------------
    ("katib argo/argo-workflow.yaml", REFUSED,
     "an Argo Workflow trial needs Argo on a cluster; the error says so and suggests a Job"),
    ("katib early-stopping/median-stop.yaml", EXACT,
     "exact with the image's files and an offline dataset (re-run after the merge, load average "
     "16): Succeeded "
     "(ExperimentMaxTrialsReached), 15 trials: 15 Succeeded; best loss 2.1602; no trial fell below "
     "the median rule on this data"),
    ("katib early-stopping/median-stop-with-json-format.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 15 trials: 8 EarlyStopped, 7 Succeeded; best "
     "accuracy 0.805 (as root); hypertune's JSON file in each trial's own /katib; medianstop on "
     "accuracy at the 2nd report. Re-run 11 times since the merge: 9 exact. The 2 others "
     "came when two harness runs overlapped and the first to finish removed the /katib "
     "mount point it had made under the other: reproduced on purpose (that run's trials "
     "failed with 'bind /katib: No such file or directory'); the first bad run had left a "
     "trial's mnist.json in the host's /katib, the same sign. The harness now leaves the "
     "folder to the last run out, and kflab makes a removed mount point again before each "
     "trial; two overlapping runs after that were both exact"),
    ("katib fpga/xgboost-example.yaml", IMAGE,
     "needs its image (an FPGA XGBoost build); trials fail naming the missing program"),
    ("katib hp-tuning/bayesian-optimization.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.1327"),
    ("katib hp-tuning/cma-es.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.1863"),
    ("katib hp-tuning/grid.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.1133; grid "
     "order as Katib's (Optuna 3.3 rule)"),
    ("katib hp-tuning/hyperband.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 2 trials: 2 Succeeded; best loss 2.0428; "
     "hyperband's master bracket gives both trials num-epochs=1 (int(r) for eta 2, r_l"
     " 2), as Katib's service does"),
    ("katib hp-tuning/hyperopt-distribution.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 1.3214"),
    ("katib hp-tuning/multivariate-tpe.yaml", EXACT,
     "exact with the image's files and an offline dataset (re-run after the merge, load average "
     "16): Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.1894"),
    ("katib hp-tuning/optuna-distribution.yaml", EXACT,
     "exact with the image's files and an offline dataset (re-run after the merge, load average "
     "16): Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.3443"),
    ("katib hp-tuning/random.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.1233"),
    ("katib hp-tuning/simple-pbt.yaml", REFUSED,
     "pbt needs each trial's own checkpoint folder mounted at the same absolute path "
     "(suggestion_trial_dir): refused saying so, with tpe/random plus medianstop or a "
     "cluster as the way out"),
    ("katib hp-tuning/sobol.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.0782"),
    ("katib hp-tuning/tpe.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.1784"),
    ("katib kubeflow-trainer/trainjob-pytorch.yaml", REFUSED,
     "a TrainJob trial needs the trainer controller: refused naming the kind"),
    ("katib kubeflow-training-operator/mpijob-horovod.yaml", REFUSED,
     "an MPIJob trial needs the MPI launcher and workers: refused naming the kind"),
    ("katib kubeflow-training-operator/pytorchjob-mnist.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.2005; each "
     "trial a PyTorchJob: Master and Worker with WORLD_SIZE=2 on gloo, metrics from "
     "the Master"),
    ("katib kubeflow-training-operator/tfjob-mnist-with-summaries.yaml", EXACT,
     "exact with the image's files and an offline dataset (scripts/upstream_tf_examples.py: "
     "/opt/tf-mnist-with-summaries/mnist.py, a synthetic mnist.npz in Keras' cache): the "
     "TensorFlowEvent collector reads accuracy from the trial's event files under "
     "/mnist-with-summaries-logs/test (created empty for each trial), as Katib's loader; "
     "learnable data: Succeeded (ExperimentGoalReached, accuracy 1.0 after one trial); "
     "10% wrong labels: 12 trials Succeeded at accuracy 0.896, the experiment Succeeded "
     "(ExperimentMaxTrialsReached); trials one at a time (announced: the folder is shared "
     "here)"),
    ("katib kubeflow-training-operator/xgboostjob-lightgbm.yaml", REFUSED,
     "an XGBoostJob trial: refused naming the kind"),
    ("katib metrics-collector/custom-metrics-collector.yaml", REFUSED,
     "a Custom collector is a sidecar that reports to katib-db-manager itself (Katib "
     "reads not its stdout): refused, print name=value (StdOut) or write a File"),
    ("katib metrics-collector/file-metrics-collector.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best accuracy 0.2250; "
     "as root, each trial gets its own /katib (a private mount namespace), so 3 run in "
     "parallel as on Katib; as another user, apply refuses it until /katib exists "
     "(sudo mkdir /katib, then chown it to the user)"),
    ("katib metrics-collector/file-metrics-collector-with-json-format.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best accuracy 0.215; "
     "hypertune's JSON file; as root, each trial gets its own /katib (a private mount "
     "namespace), 3 in parallel; as another user, apply refuses it until /katib exists"),
    ("katib metrics-collector/metrics-collection-strategy.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.0239; loss "
     "from the train lines (min), accuracy 'unavailable' (the default filter reads "
     "name=value only), as Katib"),
    ("katib nas/darts-cpu.yaml", REFUSED, "NAS needs Katib's NAS controllers: refused"),
    ("katib nas/darts-gpu.yaml", REFUSED, "NAS needs Katib's NAS controllers: refused"),
    ("katib nas/enas-cpu.yaml", REFUSED, "NAS needs Katib's NAS controllers: refused"),
    ("katib nas/enas-gpu.yaml", REFUSED, "NAS needs Katib's NAS controllers: refused"),
    ("katib resume-experiment/from-volume-resume.yaml", EXACT,
     "exact with the image's files and an offline dataset (re-run after the merge, load average "
     "16): Succeeded "
     "(ExperimentMaxTrialsReached) after Katib's e2e resume step (maxTrialCount and "
     "parallelTrialCount +1): ExperimentRestarting, 13 trials: 13 Succeeded; best loss 2.1699"),
    ("katib resume-experiment/long-running-resume.yaml", EXACT,
     "exact with the image's files and an offline dataset (re-run after the merge): "
     "Succeeded (ExperimentMaxTrialsReached) after Katib's e2e resume step (maxTrialCount "
     "and parallelTrialCount +1): Restarting stays True beside Succeeded, as Katib's "
     "MarkExperimentStatusRunning leaves it; 13 trials: 13 Succeeded; best loss 1.9277"),
    ("katib tekton/pipeline-run.yaml", EXACT,
     "refused as Katib's webhook refuses it: trial parameter learningRate is never used "
     "in the template"),
    ("katib trial-template/trial-configmap-source.yaml", REFUSED,
     "a trial template from a ConfigMap: refused, inline it as trialSpec"),
    ("katib trial-template/trial-metadata-substitution.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(ExperimentMaxTrialsReached), 12 trials: 12 Succeeded; best loss 2.0829; "
     "${trialSpec.Name} and the other metadata references resolve as Katib's (checked "
     "in each trial's env)"),
    # --- Training Operator v1.9.0, examples ------------------------------------------------
    ("training-operator pytorch/simple.yaml", EXACT,
     "exact with the image's files and an offline dataset: Succeeded "
     "(PyTorchJobSucceeded): PyTorchJob pytorch-simple is successfully completed.; "
     "{'Master': {'succeeded': 1}, 'Worker': {'succeeded': 1}}; Master and Worker with"
     " WORLD_SIZE=2 on gloo"),
    ("training-operator pytorch/cpu-demo/demo.yaml", EXACT,
     "torchrun on 2 x 2 processes: Succeeded with the operator's texts"),
    ("training-operator pytorch/elastic/echo/echo.yaml", EXACT,
     "elastic c10d rendezvous: Succeeded"),
    ("training-operator pytorch/mnist/v1/pytorch_job_mnist_gloo.yaml", REFUSED,
     "no command: the image's entrypoint is unknown locally; the error shows the command "
     "line to add"),
    ("training-operator pytorch/smoke-dist/pytorch_job_sendrecv.yaml", REFUSED,
     "no command: the image's entrypoint is unknown locally; the error shows the command "
     "line to add"),
    ("training-operator tensorflow/simple.yaml", EXACT,
     "exact with the image's files and an offline dataset (scripts/upstream_tf_examples.py: "
     "/var/tf_mnist/ from the image's Dockerfile, a synthetic mnist.npz in Keras' cache, as "
     "the replicas of a distributed job see only loopback): both Workers (TF_CONFIG for 2) "
     "train 5 epochs; Succeeded, 'TFJob kubeflow/tfjob-simple successfully completed.', "
     "Worker succeeded 2"),
    ("training-operator tensorflow/mnist_with_summaries/tf_job_mnist.yaml", EXACT,
     "exact with the image's files and an offline dataset (as simple.yaml; one replica, so "
     "it keeps the network and Keras could download): Succeeded, 'TFJob kubeflow/mnist "
     "successfully completed.'; summaries in /train/logs (the PVC mount is listed as "
     "ignored: the path is the host's)"),
    ("training-operator tensorflow/dist-mnist/tf_job_mnist.yaml", REFUSED,
     "no command: the image's entrypoint (python /var/tf_dist_mnist/dist_mnist.py, with "
     "TF_USE_LEGACY_KERAS=1 and tf_keras) is unknown locally; the error shows the command "
     "line to add"),
    # --- KServe v0.16.0, docs/samples/v1beta1 ----------------------------------------------
    ("kserve sklearn/v1/sklearn.yaml", EXACT,
     "kserve-sklearnserver, V1 predictions for iris-input.json"),
    ("kserve sklearn/v2/sklearn.yaml", EXACT,
     "fails to load as on KServe v0.16: its model-settings.json names "
     "mlserver.models.SKLearnModel, which MLServer 1.5 cannot import; the message gives "
     "the fix"),
    ("kserve xgboost/xgboost.yaml", EXACT,
     "fails to load as on KServe v0.16: model-settings.json names "
     "mlserver.models.XGBoostModel; with mlserver_xgboost.XGBoostModel the binary model.bst "
     "loads (xgboost 2.1) and answers V2"),
    ("kserve lightgbm/lightgbm.yaml", EXACT,
     "kserve-lgbserver: class probabilities for the V1 'inputs' (columns) body"),
)


def counts() -> dict[str, int]:
    out = {EXACT: 0, REFUSED: 0, IMAGE: 0}
    for _, verdict, _ in EXAMPLES:
        out[verdict] += 1
    return out
