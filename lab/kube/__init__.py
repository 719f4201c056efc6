"""Thin Kubernetes layer shared by both backends: kinds, manifests, conditions, and the
cluster API (over the kubernetes package's dynamic client, imported lazily).

Cluster API, each module taking a `Kube` (client.connect) first:
- client:      connect(kubeconfig, context) -> Kube; contexts(kubeconfig)
- objects:     Ref; apply (server-side, one field manager per purpose), get, list_objects,
               delete (propagation); MANAGER_APPLY, MANAGER_SCENARIO, install_manager()
- watch:       wait_for(predicate) over a resumed watch with resync; wait_deleted;
               WaitTimeout (shows the last status), WaitFailed; condition_is; status_summary
- logs:        pod_logs (by label selector: tail, follow), selector_for(kind, name), pods
- portforward: forward(svc/NAME | pod/NAME) on 127.0.0.1 (a free port by default)
- namespaces:  ensure_namespace, ensure_lab_namespace (Katib metrics-collector label)
- apierrors:   KubeError and its kinds (NotFound, Forbidden, Unauthorized, Conflict, Invalid,
               Unreachable, NotServed): one-line LabErrors with a hint
- names:       check_name / check_namespace before anything reaches a URL
"""
