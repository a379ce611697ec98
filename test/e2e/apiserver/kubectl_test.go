package apiserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

const manifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
        readinessProbe:
          httpGet: {path: /, port: 80}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
`

// TestKubectl drives the real kubectl with the admin kubeconfig the API server wrote.
func TestKubectl(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	s := fw.Start(t, fw.Options{})
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		return kubectl(t, s, args...)
	}
	if _, err := s.NodeClient(t, "node-1").CoreV1().Nodes().Create(ctxT(t), nodeObj("node-1"), metav1CreateOptions); err != nil {
		t.Fatal(err)
	}
	if out := run("get", "nodes"); !strings.Contains(out, "node-1") {
		t.Fatalf("get nodes:\n%s", out)
	}
	out := run("apply", "-f", file)
	if !strings.Contains(out, "deployment.apps/web created") || !strings.Contains(out, "service/web created") {
		t.Fatalf("first apply:\n%s", out)
	}
	out = run("apply", "-f", file)
	if !strings.Contains(out, "deployment.apps/web unchanged") || !strings.Contains(out, "service/web unchanged") {
		t.Fatalf("second apply:\n%s", out)
	}
	out = run("get", "deployment", "web", "-o", "yaml")
	for _, want := range []string{"kind: Deployment", "replicas: 2", "kubectl.kubernetes.io/last-applied-configuration", "periodSeconds: 10", "revisionHistoryLimit: 10"} {
		if !strings.Contains(out, want) {
			t.Fatalf("get -o yaml lacks %q:\n%s", want, out)
		}
	}
	if out := run("get", "svc", "web"); !strings.Contains(out, "ClusterIP") || !strings.Contains(out, "10.") {
		t.Fatalf("get svc:\n%s", out)
	}
	out = run("api-resources")
	for _, want := range []string{"pods", "po", "deployments", "deploy", "apps/v1", "leases", "coordination.k8s.io/v1", "endpointslices", "namespaces"} {
		if !strings.Contains(out, want) {
			t.Fatalf("api-resources lacks %q:\n%s", want, out)
		}
	}
	out = run("delete", "-f", file)
	if !strings.Contains(out, `deployment.apps "web" deleted`) || !strings.Contains(out, `service "web" deleted`) {
		t.Fatalf("delete:\n%s", out)
	}
	if out := run("get", "deploy,svc", "-o", "name"); strings.Contains(out, "/web") {
		t.Fatalf("still there after delete:\n%s", out)
	}
}
