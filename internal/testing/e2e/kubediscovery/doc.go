// Package kubediscovery checks `llmdiag serve --discovery` against a real
// Kubernetes API server (internal/testing/kubetest): pods behind two
// InferencePools and pods selected by label through role pod, in two
// namespaces, each pod's engine a simulated one behind a reverse proxy on
// the pod's own loopback address; the nodes listed within seconds, churn
// followed with removed events and no verdict lost, and an API server
// that goes away for 30 s warned about while every node keeps refreshing.
//
// The tests skip under -short.
package kubediscovery
