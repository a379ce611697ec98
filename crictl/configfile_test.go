package crictl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPodSandboxConfig(t *testing.T) {
	p := writeFile(t, "pod.yaml", `metadata:
  name: web
  namespace: default
  attempt: 1
hostname: web
log_directory: /tmp/logs
port_mappings:
- container_port: 8080
  protocol: 0
labels:
  app: web
linux:
  security_context:
    namespace_options:
      network: 0
`)
	cfg, err := loadPodSandboxConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetMetadata().GetName() != "web" || cfg.GetMetadata().GetAttempt() != 1 || cfg.GetLogDirectory() != "/tmp/logs" ||
		cfg.GetPortMappings()[0].GetContainerPort() != 8080 || cfg.GetLabels()["app"] != "web" {
		t.Errorf("decoded %v", cfg)
	}
	if cfg.GetMetadata().GetUid() == "" {
		t.Error("an empty uid should be filled in")
	}

	j := writeFile(t, "pod.json", `{"metadata": {"name": "web", "namespace": "default", "uid": "u-1"}, "dns_config": {"servers": ["10.0.0.10"]}}`)
	cfg, err = loadPodSandboxConfig(j)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetMetadata().GetUid() != "u-1" || cfg.GetDnsConfig().GetServers()[0] != "10.0.0.10" {
		t.Errorf("decoded %v", cfg)
	}
}

func TestConfigErrorsNameFileLineField(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		want                []string
	}{
		{"unknown field", "pod.yaml", "metadata:\n  name: web\n  nmae: x\n  namespace: d\n",
			[]string{"pod.yaml:3:3:", "field metadata.nmae: unknown field", "known fields here: attempt, name, namespace, uid"}},
		{"wrong type", "pod.yaml", "metadata:\n  name: web\n  namespace: d\n  attempt: first\n",
			[]string{"pod.yaml:4:12:", "field metadata.attempt", "want a non-negative integer", `"first"`}},
		{"negative uint", "pod.yaml", "metadata:\n  name: web\n  namespace: d\n  attempt: -1\n",
			[]string{"pod.yaml:4:12:", "field metadata.attempt"}},
		{"nested list item", "pod.json", "{\n  \"metadata\": {\"name\": \"w\", \"namespace\": \"d\"},\n  \"port_mappings\": [\n    {\"container_port\": 80},\n    {\"containerPort\": 81}\n  ]\n}\n",
			[]string{"pod.json:5:6:", "field port_mappings[1].containerPort: unknown field"}},
		{"enum hint", "pod.yaml", "metadata: {name: w, namespace: d}\nlinux:\n  security_context:\n    namespace_options:\n      network: NODE\n",
			[]string{"pod.yaml:5:16:", "field linux.security_context.namespace_options.network", "2=NODE"}},
		{"object expected", "pod.yaml", "metadata: web\n", []string{"pod.yaml:1:11:", "field metadata: want an object"}},
		{"json syntax", "pod.json", "{\n  \"metadata\": {\"name\": \"w\",\n}\n", []string{"pod.json:3:1: invalid JSON: invalid character '}'"}},
		{"missing name", "pod.yaml", "metadata:\n  namespace: d\n", []string{"pod.yaml: field metadata.name: required"}},
		{"missing metadata", "pod.yaml", "hostname: x\n", []string{"pod.yaml: field metadata: required"}},
		{"empty", "pod.yaml", "", []string{"pod.yaml: file is empty"}},
		{"number for a string", "pod.json", "{\"metadata\": {\"name\": 5, \"namespace\": \"d\"}}\n",
			[]string{"pod.json:1:23:", "field metadata.name: want a string, got the number 5"}},
		{"bool for a label value", "pod.yaml", "metadata: {name: w, namespace: d}\nlabels:\n  on: true\n",
			[]string{"pod.yaml:3:7:", "field labels.on: want a string, got true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.file, tc.content)
			_, err := loadPodSandboxConfig(p)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), p) {
				t.Errorf("error %q does not start with the file name", err)
			}
		})
	}
	if _, err := loadPodSandboxConfig(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadContainerConfig(t *testing.T) {
	p := writeFile(t, "ctr.yaml", `metadata: {name: srv}
image: {image: nodekit.local/demo:1}
command: [/demo]
args: ["--port", "8080"]
envs:
- {key: A, value: "1"}
log_path: srv.log
linux:
  resources: {memory_limit_in_bytes: 67108864, cpu_shares: 512}
`)
	cfg, err := loadContainerConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetImage().GetUserSpecifiedImage() != "nodekit.local/demo:1" || string(cfg.GetEnvs()[0].GetValue()) != "1" ||
		cfg.GetLinux().GetResources().GetMemoryLimitInBytes() != 64<<20 || cfg.GetArgs()[1] != "8080" {
		t.Errorf("decoded %v", cfg)
	}
	bad := writeFile(t, "ctr.yaml", "metadata: {name: srv}\nimage: {image: x}\nlinux:\n  resources:\n    memory: 1\n")
	if _, err := loadContainerConfig(bad); err == nil || !strings.Contains(err.Error(), "ctr.yaml:5:5: field linux.resources.memory: unknown field") {
		t.Errorf("err = %v", err)
	}
	noImage := writeFile(t, "ctr.yaml", "metadata: {name: srv}\n")
	if _, err := loadContainerConfig(noImage); err == nil || !strings.Contains(err.Error(), "field image.image: required") {
		t.Errorf("err = %v", err)
	}
}
