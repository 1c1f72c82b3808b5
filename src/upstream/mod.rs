//! Upstream apiserver access: kubeconfig, ureq client, reflectors.
