// Package examples holds nodekit's example manifests, embedded so that `nodekit up` can apply the demo
// workload from the binary alone. The YAML files in this directory are the source of truth; users apply
// them with `kubectl apply -f examples/<file>.yaml` too.
package examples

import _ "embed"

// Demo is demo.yaml: a Deployment "demo" of 3 nodekit.local/demo-server:v1 replicas (HTTP on 8080,
// readiness probe GET /readyz, liveness probe GET /healthz, POD_NAME/POD_NAMESPACE/POD_IP from the
// downward API) and a ClusterIP Service "demo" on port 80, both in namespace default, as multi-document
// YAML.
//
//go:embed demo.yaml
var Demo []byte

// DemoName is the name of the demo Deployment and Service; DemoNamespace their namespace.
const (
	DemoName      = "demo"
	DemoNamespace = "default"
)
