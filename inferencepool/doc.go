// Package inferencepool finds the engine pods behind Gateway API Inference
// Extension InferencePools (inference.networking.k8s.io/v1), the resource
// through which llm-d, KServe, Envoy AI Gateway, Istio and kgateway route
// LLM traffic, as a Prometheus service discovery mechanism.
//
// It promises one target group per pool, whose targets are every pod the
// pool's selector picks in its namespace that has an IP, once per target
// port (one node per data-parallel rank port): address podIP:port, the
// pod's meta labels under the names Prometheus's kubernetes_sd_configs
// role pod gives them (__meta_kubernetes_namespace,
// __meta_kubernetes_pod_name, _ip, _ready, _phase, _node_name, _uid,
// _label_*, _labelpresent_*, _annotation_*, _annotationpresent_*), and the
// pool's own: __meta_inferencepool_name, __meta_inferencepool_target_port
// and __meta_inferencepool_target_port_index. So relabeling written for
// a pod role carries over, and a pool becomes a fleet label. A pool that
// goes away leaves an empty group of its source, which removes its
// targets; a pod that goes away, or stops being selected, leaves its
// pool's group at the next update.
//
// The pools and pods are watched with client-go informers (list, then
// watch; a watch that breaks is re-listed by client-go with backoff): a
// change sends the groups again, at most once per MinInterval. While the
// API server cannot be reached, the informers keep their last lists and
// nothing is sent: the targets stay as they were. A LIST or WATCH the API
// server refuses (as for want of RBAC) is logged as an error (which
// fleetsd takes for the discovery failing), and so, once, is an API
// server that stops answering (the discoverer counts its client's
// requests; client-go retries them without a word). Then it asks the
// server every MinInterval whether it is back, and lists everything anew
// once it is, rather than when client-go's watches next retry (they back
// off up to a minute), sending the groups again.
package inferencepool
