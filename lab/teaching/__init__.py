"""Teaching environments: a class on one shared cluster (roster, namespaces, quotas, student
kubeconfigs, status and grades) and the sizing of a server for it."""
