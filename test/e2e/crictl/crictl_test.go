// Package crictl_test drives `nodekit crictl` end to end against a real private containerd (started by
// test/framework/containerd with the bundled images imported): runp → create → start → pods/ps/images
// with their columns and filters → HTTP to the pod → exec (sync and streaming) → logs → stop → rm →
// rmp, every -o format, image rmi/load, and the bad-input paths (malformed configs, unknown and
// ambiguous ID prefixes, a runtime that is down).
package crictl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/crictl"
	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/images/bundled"
	fw "github.com/nodekit/nodekit/test/framework/containerd"
)

// cli runs crictl in-process against one runtime endpoint.
type cli struct {
	t  *testing.T
	ep string
}

// run executes `crictl -r EP -t 60s ARGS...` with stdin and returns stdout, stderr and the error.
func (c cli) runIn(stdin string, args ...string) (string, string, error) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"-r", c.ep, "-t", "60s"}, args...)
	err := crictl.Run(ctx, full, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func (c cli) run(args ...string) (string, string, error) {
	c.t.Helper()
	return c.runIn("", args...)
}

// must runs crictl and fails the test on error; it returns stdout.
func (c cli) must(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("crictl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// mustFail runs crictl, wants an error containing every fragment, and returns it.
func (c cli) mustFail(args []string, fragments ...string) error {
	c.t.Helper()
	out, _, err := c.run(args...)
	if err == nil {
		c.t.Fatalf("crictl %s succeeded (%q), want an error", strings.Join(args, " "), out)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			c.t.Errorf("crictl %s: error %q does not contain %q", strings.Join(args, " "), err, f)
		}
	}
	return err
}

func suffix() string {
	var b [3]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tableRows splits table output into header and rows of cells (cells are separated by 3+ spaces, as
// tabwriter pads them).
func tableRows(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	sep := regexp.MustCompile(`\s{3,}`)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		cells := sep.Split(strings.TrimSpace(l), -1)
		if i == 0 {
			header = cells
			continue
		}
		rows = append(rows, cells)
	}
	return header, rows
}

func findRow(rows [][]string, col int, val string) []string {
	for _, r := range rows {
		if len(r) > col && r[col] == val {
			return r
		}
	}
	return nil
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// podConfigs writes a pod sandbox config and a demo-server container config for pod name.
func podConfigs(t *testing.T, rt *fw.Runtime, name, ns string) (podFile, ctrFile string) {
	dir := t.TempDir()
	logDir := filepath.Join(rt.Dir, "pods", ns+"_"+name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	podFile = writeFile(t, dir, "pod.yaml", fmt.Sprintf(`metadata:
  name: %[1]s
  namespace: %[2]s
  uid: uid-%[1]s
hostname: %[1]s
log_directory: %[3]s
labels:
  app: crictl-e2e
  io.kubernetes.pod.name: %[1]s
  io.kubernetes.pod.namespace: %[2]s
linux: {}
`, name, ns, logDir))
	ctrFile = writeFile(t, dir, "ctr.json", fmt.Sprintf(`{
  "metadata": {"name": "demo"},
  "image": {"image": %q},
  "envs": [{"key": "POD_NAME", "value": %q}, {"key": "POD_NAMESPACE", "value": %q}],
  "labels": {"io.kubernetes.pod.name": %q, "io.kubernetes.pod.namespace": %q, "tier": "web"},
  "log_path": "demo.log",
  "linux": {}
}`, bundled.DemoServerV1, name, ns, name, ns))
	return podFile, ctrFile
}

var hexID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestLifecycle is the acceptance path: runp → create → start → listing with columns and filters →
// HTTP → exec → logs → stop → rm → rmp, with nothing left at the end.
func TestLifecycle(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	c := cli{t: t, ep: rt.Endpoint()}
	name, ns := "web-"+suffix(), "crictl-e2e"
	podFile, ctrFile := podConfigs(t, rt, name, ns)

	podID := strings.TrimSpace(c.must("runp", podFile))
	if !hexID.MatchString(podID) {
		t.Fatalf("runp printed %q, want a sandbox ID", podID)
	}
	// create takes the pod by ID prefix.
	ctrID := strings.TrimSpace(c.must("create", podID[:12], ctrFile, podFile))
	if !hexID.MatchString(ctrID) {
		t.Fatalf("create printed %q, want a container ID", ctrID)
	}
	if got := strings.TrimSpace(c.must("start", ctrID[:8])); got != ctrID {
		t.Errorf("start printed %q, want %q", got, ctrID)
	}

	t.Run("pods", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		header, rows := tableRows(t, c.must("pods"))
		if want := []string{"POD ID", "CREATED", "STATE", "NAME", "NAMESPACE", "ATTEMPT", "RUNTIME"}; strings.Join(header, "|") != strings.Join(want, "|") {
			t.Errorf("pods header = %q, want %q", header, want)
		}
		row := findRow(rows, 0, podID[:13])
		if row == nil {
			t.Fatalf("pods has no row for %s: %v", podID[:13], rows)
		}
		if !regexp.MustCompile(`^(Less than a second|\d+ seconds?|About a minute|\d+ minutes) ago$`).MatchString(row[1]) ||
			row[2] != "Ready" || row[3] != name || row[4] != ns || row[5] != "0" || row[6] != "(default)" {
			t.Errorf("pods row = %q", row)
		}
		for _, tc := range []struct {
			args []string
			want bool
		}{
			{[]string{"--name", "^web-"}, true},
			{[]string{"--name", "nomatch"}, false},
			{[]string{"--namespace", "crictl-e"}, true},
			{[]string{"--namespace", "^default$"}, false},
			{[]string{"--state", "ready"}, true},
			{[]string{"--state", "notready"}, false},
			{[]string{"--label", "app=crictl-e2e"}, true},
			{[]string{"--label", "app=other"}, false},
			{[]string{"--id", podID}, true},
			{[]string{"--latest"}, true},
			{[]string{"--last", "1"}, true},
		} {
			out := c.must(append([]string{"pods", "-q"}, tc.args...)...)
			if got := strings.Contains(out, podID); got != tc.want {
				t.Errorf("pods -q %v: listed=%v, want %v (%q)", tc.args, got, tc.want, out)
			}
		}
		c.mustFail([]string{"pods", "--state", "sleepy"}, "--state", "ready or notready")
		if out := c.must("pods", "-v"); !strings.Contains(out, "ID: "+podID) || !strings.Contains(out, "Namespace: "+ns) || !strings.Contains(out, "Status: Ready") {
			t.Errorf("pods -v:\n%s", out)
		}
		if out := c.must("pods", "--no-trunc"); !strings.Contains(out, podID) {
			t.Errorf("pods --no-trunc lacks the full ID:\n%s", out)
		}
	})

	var podIP, netnsPath string
	t.Run("inspectp and HTTP", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		netnsPath = strings.TrimSpace(c.must("inspectp", "-o", "go-template", "--template",
			`{{range .info.runtimeSpec.linux.namespaces}}{{if eq .type "network"}}{{.path}}{{end}}{{end}}`, podID))
		if _, err := os.Stat(netnsPath); err != nil {
			t.Errorf("pod network namespace %q from inspectp: %v", netnsPath, err)
		}
		podIP = strings.TrimSpace(c.must("inspectp", "-o", "go-template", "--template", "{{.status.network.ip}}", podID[:6]))
		if !strings.HasPrefix(podIP, "10.213.") {
			t.Fatalf("pod IP = %q, want one in the test subnet %s", podIP, rt.Subnet)
		}
		body := fw.HTTPGet(t, "http://"+podIP+":8080/")
		if !strings.Contains(body, name) {
			t.Errorf("GET / from the pod = %q, want it to name the pod %s", body, name)
		}
		var doc struct {
			Status struct {
				ID        string `json:"id"`
				State     string `json:"state"`
				CreatedAt string `json:"createdAt"`
				Metadata  struct{ Name, Namespace, UID string }
			} `json:"status"`
			Info map[string]any `json:"info"`
		}
		if err := json.Unmarshal([]byte(c.must("inspectp", podID)), &doc); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339Nano, doc.Status.CreatedAt); err != nil || doc.Status.ID != podID ||
			doc.Status.State != "SANDBOX_READY" || doc.Status.Metadata.Name != name || doc.Info == nil {
			t.Errorf("inspectp JSON = %+v (time err %v)", doc.Status, err)
		}
		if out := c.must("inspectp", "-o", "table", podID); !strings.Contains(out, "IP Addresses: "+podIP) || !strings.Contains(out, "Status: SANDBOX_READY") {
			t.Errorf("inspectp -o table:\n%s", out)
		}
	})

	t.Run("ps", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		header, rows := tableRows(t, c.must("ps"))
		if want := []string{"CONTAINER", "IMAGE", "CREATED", "STATE", "NAME", "ATTEMPT", "POD ID", "POD", "NAMESPACE"}; strings.Join(header, "|") != strings.Join(want, "|") {
			t.Errorf("ps header = %q, want %q", header, want)
		}
		row := findRow(rows, 0, ctrID[:13])
		if row == nil {
			t.Fatalf("ps has no row for %s: %v", ctrID[:13], rows)
		}
		// containerd reports the image as its ID (sha256:...), shown truncated like upstream.
		if !regexp.MustCompile(`^([0-9a-f]{13}|nodekit.local/demo-server:v1)$`).MatchString(row[1]) || row[3] != "Running" ||
			row[4] != "demo" || row[5] != "0" || row[6] != podID[:13] || row[7] != name || row[8] != ns {
			t.Errorf("ps row = %q", row)
		}
		for _, tc := range []struct {
			args []string
			want bool
		}{
			{[]string{"--pod", podID[:10]}, true},
			{[]string{"--name", "^demo$"}, true},
			{[]string{"--name", "nomatch"}, false},
			{[]string{"--state", "running"}, true},
			{[]string{"--state", "exited"}, false},
			{[]string{"--label", "tier=web"}, true},
			{[]string{"--label", "tier=db"}, false},
			{[]string{"--image", bundled.DemoServerV1}, true},
			{[]string{"--image", bundled.DemoServerV2}, false},
			{[]string{"--namespace", ns}, true},
			{[]string{"-a"}, true},
			{[]string{"--latest"}, true},
			{[]string{"--last", "1"}, true},
		} {
			out := c.must(append([]string{"ps", "-q"}, tc.args...)...)
			if got := strings.Contains(out, ctrID); got != tc.want {
				t.Errorf("ps -q %v: listed=%v, want %v (%q)", tc.args, got, tc.want, out)
			}
		}
		if out := c.must("ps", "-r"); !strings.Contains(out, bundled.DemoServerV1) {
			t.Errorf("ps --resolve-image-path does not show the image name:\n%s", out)
		}
	})

	t.Run("images", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		header, rows := tableRows(t, c.must("images"))
		if want := []string{"IMAGE", "TAG", "IMAGE ID", "SIZE"}; strings.Join(header, "|") != strings.Join(want, "|") {
			t.Errorf("images header = %q, want %q", header, want)
		}
		row := findRow(rows, 0, "nodekit.local/demo-server")
		if row == nil || (row[1] != "v1" && row[1] != "v2") || !regexp.MustCompile(`^[0-9a-f]{13}$`).MatchString(row[2]) ||
			!regexp.MustCompile(`^[0-9.]+(B|kB|MB)$`).MatchString(row[3]) {
			t.Errorf("images row for demo-server = %q (all: %v)", row, rows)
		}
		if findRow(rows, 0, "nodekit.local/pause") == nil {
			t.Errorf("images lacks the pause image: %v", rows)
		}
		if h, _ := tableRows(t, c.must("images", "--digests")); len(h) != 5 || h[2] != "DIGEST" {
			t.Errorf("images --digests header = %q", h)
		}
		if _, rows := tableRows(t, c.must("images", "--filter", "reference=demo-server:v")); len(rows) != 2 || rows[0][0] != "nodekit.local/demo-server" {
			t.Errorf("images --filter reference=: %v", rows)
		}
		if out := c.must("images", "-q"); !regexp.MustCompile(`(?m)^sha256:[0-9a-f]{64}$`).MatchString(out) {
			t.Errorf("images -q:\n%s", out)
		}
		var list struct {
			Images []struct {
				ID       string   `json:"id"`
				RepoTags []string `json:"repoTags"`
				Size     string   `json:"size"`
			} `json:"images"`
		}
		if err := json.Unmarshal([]byte(c.must("images", "-o", "json", bundled.DemoServerV1)), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Images) != 1 || list.Images[0].RepoTags[0] != bundled.DemoServerV1 || list.Images[0].Size == "0" {
			t.Errorf("images -o json %s = %+v", bundled.DemoServerV1, list)
		}
		var st map[string]map[string]any
		if err := yaml.Unmarshal([]byte(c.must("inspecti", "-o", "yaml", bundled.DemoServerV1)), &st); err != nil {
			t.Fatal(err)
		}
		if tags, _ := st["status"]["repoTags"].([]any); len(tags) == 0 || tags[0] != bundled.DemoServerV1 {
			t.Errorf("inspecti -o yaml: %v", st)
		}
		if out := c.must("imagefsinfo"); !strings.Contains(out, "imageFilesystems") {
			t.Errorf("imagefsinfo:\n%s", out)
		}
	})

	t.Run("output formats", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		var ps struct {
			Containers []struct {
				ID           string `json:"id"`
				PodSandboxID string `json:"podSandboxId"`
				State        string `json:"state"`
			} `json:"containers"`
		}
		if err := json.Unmarshal([]byte(c.must("ps", "-o", "json", "--pod", podID)), &ps); err != nil {
			t.Fatal(err)
		}
		if len(ps.Containers) != 1 || ps.Containers[0].ID != ctrID || ps.Containers[0].PodSandboxID != podID || ps.Containers[0].State != "CONTAINER_RUNNING" {
			t.Errorf("ps -o json = %+v", ps)
		}
		var pods struct {
			Items []struct {
				ID       string            `json:"id"`
				Labels   map[string]string `json:"labels"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := yaml.Unmarshal([]byte(c.must("pods", "-o", "yaml", "--id", podID)), &pods); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || pods.Items[0].ID != podID || pods.Items[0].Metadata.Name != name || pods.Items[0].Labels["app"] != "crictl-e2e" {
			t.Errorf("pods -o yaml = %+v", pods)
		}
		out := c.must("inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.metadata.name}} {{.status.image.image}}", ctrID[:7])
		if got := strings.TrimSpace(out); got != "CONTAINER_RUNNING demo "+bundled.DemoServerV1 {
			t.Errorf("inspect -o go-template = %q", got)
		}
		var insp struct {
			Status struct {
				StartedAt  string `json:"startedAt"`
				FinishedAt string `json:"finishedAt"`
				LogPath    string `json:"logPath"`
			} `json:"status"`
		}
		if err := json.Unmarshal([]byte(c.must("inspect", ctrID)), &insp); err != nil {
			t.Fatal(err)
		}
		if st, err := time.Parse(time.RFC3339Nano, insp.Status.StartedAt); err != nil || time.Since(st) > 10*time.Minute || !strings.HasSuffix(insp.Status.LogPath, "demo.log") {
			t.Errorf("inspect JSON status = %+v", insp.Status)
		}
		c.mustFail([]string{"ps", "-o", "xml"}, "unsupported format", "xml")
		c.mustFail([]string{"inspect", "-o", "go-template", "--template", "{{.status.nosuch}}", ctrID}, "nosuch")
		if out := c.must("info", "-o", "go-template", "--template", "{{range .status.conditions}}{{.type}}={{.status}} {{end}}"); !strings.Contains(out, "RuntimeReady=true") {
			t.Errorf("info go-template: %q", out)
		}
		if out := c.must("version"); !regexp.MustCompile(`(?m)^RuntimeName:  containerd$`).MatchString(out) || !strings.Contains(out, "RuntimeApiVersion:  v1") {
			t.Errorf("version:\n%s", out)
		}
	})

	t.Run("exec", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		if got := c.must("exec", "-s", ctrID[:9], "hostname"); strings.TrimSpace(got) != name {
			t.Errorf("exec -s hostname = %q, want %q", got, name)
		}
		// Streaming exec through the runtime's streaming server (SPDY), with stdin.
		out, _, err := c.runIn("hello from stdin\n", "exec", "-i", ctrID, "cat")
		if err != nil || out != "hello from stdin\n" {
			t.Errorf("exec -i cat = %q, %v", out, err)
		}
		out, _, err = c.run("exec", ctrID, "echo", "-n", "streamed")
		if err != nil || out != "streamed" {
			t.Errorf("exec echo = %q, %v", out, err)
		}
		// The remote exit status comes back as *ExitError (the process exits with it).
		for _, sync := range []bool{true, false} {
			args := []string{"exec", ctrID, "false"}
			if sync {
				args = []string{"exec", "-s", ctrID, "false"}
			}
			_, _, err := c.run(args...)
			var ee *crictl.ExitError
			if !errors.As(err, &ee) || ee.Code != 1 {
				t.Errorf("crictl %v: err = %v, want exit status 1", args, err)
			}
		}
		// -t needs a terminal.
		c.mustFail([]string{"exec", "-it", ctrID, "sh"}, "not a terminal")
	})

	t.Run("logs", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		// The demo server logs (to stdout) a start line and a listening line.
		logs, _, err := c.run("logs", ctrID[:10])
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
		if len(lines) < 2 || !strings.Contains(lines[0], "starting pod="+name) || !strings.Contains(logs, "listening http=:8080") {
			t.Fatalf("logs = %q", logs)
		}
		tail, _, _ := c.run("logs", "--tail", "1", ctrID)
		if tail != lines[len(lines)-1]+"\n" {
			t.Errorf("logs --tail 1 = %q, want %q", tail, lines[len(lines)-1]+"\n")
		}
		ts, _, _ := c.run("logs", "--timestamps", "--tail", "1", ctrID)
		stamp, rest, _ := strings.Cut(ts, " ")
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil || rest != lines[len(lines)-1]+"\n" {
			t.Errorf("logs --timestamps = %q (%v)", ts, err)
		}
		future, _, _ := c.run("logs", "--since", time.Now().Add(time.Hour).Format(time.RFC3339), ctrID)
		if future != "" {
			t.Errorf("logs --since <future> = %q, want nothing", future)
		}
		out, stderr, _ := c.run("logs", "--stream", "stderr", ctrID)
		if out != "" || stderr != "" {
			t.Errorf("logs --stream stderr = %q/%q, want nothing (the server logs to stdout)", out, stderr)
		}
		c.mustFail([]string{"logs", "--previous", ctrID}, "previous terminated container demo not found")
	})

	t.Run("stats", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		header, rows := tableRows(t, c.must("stats", "-s", "1", ctrID[:8]))
		if strings.Join(header, "|") != "CONTAINER|NAME|CPU %|MEM|DISK|INODES|SWAP" || findRow(rows, 0, ctrID[:13]) == nil {
			t.Errorf("stats: %q %q", header, rows)
		}
		var st struct {
			Stats []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"stats"`
		}
		if err := json.Unmarshal([]byte(c.must("stats", "-o", "json", "--id", ctrID)), &st); err != nil || len(st.Stats) != 1 || st.Stats[0].Attributes.ID != ctrID {
			t.Errorf("stats -o json: %+v %v", st, err)
		}
	})

	t.Run("prefixes", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		c.mustFail([]string{"inspect", "ffffzz"}, `no container with ID prefix "ffffzz"`)
		c.mustFail([]string{"stopp", "zz"}, `no pod sandbox with ID prefix "zz"`)
		// Create containers (never started) until two IDs share their first character; that
		// character is then an ambiguous prefix.
		byFirst := map[byte]string{}
		var pair [2]string
		for i := 0; i < 17 && pair[0] == ""; i++ {
			f := writeFile(t, t.TempDir(), "c.yaml", fmt.Sprintf("metadata: {name: extra%d}\nimage: {image: %s}\nlinux: {}\n", i, bundled.DemoServerV1))
			id := strings.TrimSpace(c.must("create", podID, f, podFile))
			if other, ok := byFirst[id[0]]; ok {
				pair = [2]string{other, id}
			}
			byFirst[id[0]] = id
		}
		if other, ok := byFirst[ctrID[0]]; ok && pair[0] == "" {
			pair = [2]string{other, ctrID}
		}
		err := c.mustFail([]string{"inspect", pair[0][:1]}, fmt.Sprintf("ID prefix %q is ambiguous", pair[0][:1]), pair[0], pair[1])
		t.Logf("ambiguous prefix error:\n%v", err)
		for _, id := range byFirst {
			if id != ctrID {
				c.must("rm", id)
			}
		}
	})

	// stop → rm → stopp → rmp; nothing is left. `logs -f` follows the log until the container stops.
	c.mustFail([]string{"rm", ctrID}, "is running, please stop it first")
	follow := &syncBuffer{}
	followDone := make(chan error, 1)
	go func() {
		followDone <- crictl.Run(context.Background(), []string{"-r", c.ep, "logs", "-f", ctrID}, strings.NewReader(""), follow, follow)
	}()
	if got := strings.TrimSpace(c.must("stop", "--timeout", "5", ctrID[:11])); got != ctrID {
		t.Errorf("stop printed %q", got)
	}
	select {
	case err := <-followDone:
		// The demo server logs its SIGTERM and its exit; the follower saw them and then ended.
		if err != nil || !strings.Contains(follow.String(), "received SIGTERM") || !strings.Contains(follow.String(), "exiting") {
			t.Errorf("logs -f ended with %v; output:\n%s", err, follow.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("logs -f still following 30s after the container stopped; output:\n%s", follow.String())
	}
	if out := c.must("ps", "-a", "--state", "exited", "-q"); strings.TrimSpace(out) != ctrID {
		t.Errorf("ps --state exited -q = %q, want %s", out, ctrID)
	}
	var exited struct {
		Status struct {
			FinishedAt string `json:"finishedAt"`
		} `json:"status"`
	}
	json.Unmarshal([]byte(c.must("inspect", ctrID)), &exited)
	if ft, err := time.Parse(time.RFC3339Nano, exited.Status.FinishedAt); err != nil || ft.Year() < 2000 {
		t.Errorf("inspect of an exited container: finishedAt %q", exited.Status.FinishedAt)
	}
	logPath := filepath.Join(rt.Dir, "pods", ns+"_"+name, "demo.log")
	if _, err := os.Stat(logPath); err != nil {
		t.Errorf("container log %s: %v", logPath, err)
	}
	if got := strings.TrimSpace(c.must("rm", ctrID)); got != ctrID {
		t.Errorf("rm printed %q", got)
	}
	if _, err := os.Stat(logPath); !os.IsNotExist(err) {
		t.Errorf("rm left the container log %s (stat: %v)", logPath, err)
	}
	c.mustFail([]string{"rmp", podID}, "is running, please stop it first")
	if got := c.must("stopp", podID[:5]); got != "Stopped sandbox "+podID+"\n" {
		t.Errorf("stopp printed %q", got)
	}
	if out := c.must("pods", "-q", "--state", "notready"); strings.TrimSpace(out) != podID {
		t.Errorf("pods --state notready -q = %q", out)
	}
	if got := c.must("rmp", podID); got != "Removed sandbox "+podID+"\n" {
		t.Errorf("rmp printed %q", got)
	}
	if out := c.must("pods", "-q"); out != "" {
		t.Errorf("pods left after rmp: %q", out)
	}
	if out := c.must("ps", "-a", "-q"); out != "" {
		t.Errorf("containers left after rm: %q", out)
	}
	// Nothing of the pod is left on the host: no network namespace, no mount naming its IDs.
	if _, err := os.Stat(netnsPath); netnsPath == "" || !os.IsNotExist(err) {
		t.Errorf("network namespace %q still there after rmp (stat: %v)", netnsPath, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{podID, ctrID} {
		if strings.Contains(string(mounts), id) {
			t.Errorf("a mount naming %s is left after rm/rmp", id)
		}
	}
}

// TestForceRemoveAll removes running pods and containers with -f/-a.
func TestForceRemoveAll(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	c := cli{t: t, ep: rt.Endpoint()}
	var pods []string
	for i := 0; i < 2; i++ {
		p := rt.RunDemoPod(t, fmt.Sprintf("f%d-%s", i, suffix()))
		pods = append(pods, p.SandboxID)
	}
	out := c.must("rm", "-a", "-f")
	if n := strings.Count(out, "\n"); n < 2 {
		t.Errorf("rm -a -f printed %q, want a line per container (stop and remove)", out)
	}
	if out := c.must("ps", "-a", "-q"); out != "" {
		t.Errorf("containers left after rm -a -f: %q", out)
	}
	out = c.must("rmp", "-a", "-f")
	for _, p := range pods {
		if !strings.Contains(out, "Removed sandbox "+p) {
			t.Errorf("rmp -a -f output lacks %s:\n%s", p, out)
		}
	}
	if out := c.must("pods", "-q"); out != "" {
		t.Errorf("pods left after rmp -a -f: %q", out)
	}
}

// TestImagesRemoveAndLoad removes a bundled image with rmi and imports it back from its archive with
// load (the runtime/containerd importer).
func TestImagesRemoveAndLoad(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	c := cli{t: t, ep: rt.Endpoint()}
	if got := c.must("rmi", bundled.DemoServerV2); got != "Deleted: "+bundled.DemoServerV2+"\n" {
		t.Errorf("rmi printed %q", got)
	}
	if out := c.must("images", "-q", bundled.DemoServerV2); out != "" {
		t.Fatalf("image still listed after rmi: %q", out)
	}
	c.mustFail([]string{"rmi", bundled.DemoServerV2}, "no such image")
	archive := filepath.Join(fw.ImagesDir(t), build.ArchiveName(bundled.DemoServerV2))
	// With stderr on a terminal, load draws a progress bar there.
	out, termShows := c.runStderrTTY("load", archive)
	if !strings.Contains(out, "Loaded image: "+bundled.DemoServerV2+" (sha256:") {
		t.Errorf("load printed %q", out)
	}
	if ok, term := termShows(regexp.MustCompile(`demo-server-v2\.tar \[=+\] 100% [0-9.]+MB/[0-9.]+MB`)); !ok {
		t.Errorf("load drew no complete progress bar on the terminal: %q", term)
	}
	if _, rows := tableRows(t, c.must("images", bundled.DemoServerV2)); len(rows) != 1 || rows[0][1] != "v2" {
		t.Errorf("images after load: %v", rows)
	}
	c.mustFail([]string{"load", filepath.Join(t.TempDir(), "missing.tar")}, "missing.tar")
	// --pinned adds a PINNED column (containerd 1.6 reports false for every image, 1.7+ honours the
	// pinned label the importer sets).
	header, rows := tableRows(t, c.must("images", "--pinned"))
	if len(header) != 5 || header[4] != "PINNED" || len(rows) != len(bundled.All) || !regexp.MustCompile(`^(true|false)$`).MatchString(rows[0][4]) {
		t.Errorf("images --pinned: %q %q", header, rows)
	}
	// A pull from a registry that does not exist fails with the runtime's reason.
	c.mustFail([]string{"pull", "127.0.0.1:1/none:v1"}, "pulling image 127.0.0.1:1/none:v1")

	// rmi --prune removes every image no container uses except pinned ones (containerd 1.6 pins
	// nothing; 2.x pins the bundled images the importer labels): what is left is all pinned.
	pod := rt.RunDemoPod(t, "prune-"+suffix())
	c.must("rmi", "--prune")
	_, rows = tableRows(t, c.must("images", "--pinned"))
	for _, r := range rows {
		if r[4] != "true" && r[0]+":"+r[1] != bundled.DemoServerV1 && r[0]+":"+r[1] != bundled.Pause {
			t.Errorf("rmi --prune left an unused, unpinned image: %q", r)
		}
	}
	if findRow(rows, 0, "nodekit.local/demo-server") == nil {
		t.Errorf("rmi --prune removed the image of running pod %s: %v", pod.Name, rows)
	}
}

// TestBadInput covers the error paths of the issue: malformed configs name file, line and field;
// unknown prefixes; an unreachable runtime gives one line.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	c := cli{t: t, ep: "unix://" + filepath.Join(dir, "no-runtime.sock")}
	badYAML := writeFile(t, dir, "pod.yaml", "metadata:\n  name: web\n  namespace: default\n  atempt: 1\n")
	c.mustFail([]string{"runp", badYAML}, badYAML+":4:3: field metadata.atempt: unknown field")
	badJSON := writeFile(t, dir, "ctr.json", "{\n  \"metadata\": {\"name\": \"x\"},\n  \"image\": {\"image\": \"y\"},\n  \"linux\": {\"resources\": {\"cpu_shares\": \"many\"}}\n}\n")
	podOK := writeFile(t, dir, "ok.yaml", "metadata: {name: web, namespace: default}\n")
	c.mustFail([]string{"create", "abc", badJSON, podOK}, badJSON+":4:41: field linux.resources.cpu_shares: want an integer")
	syntax := writeFile(t, dir, "broken.json", "{\n  \"metadata\": {\"name\": \"x\"\n")
	c.mustFail([]string{"runp", syntax}, syntax+":3:1: invalid JSON: unexpected end of JSON input")

	// Runtime down: one line, naming the endpoint and the reason.
	err := c.mustFail([]string{"ps"}, "runtime not reachable at "+c.ep, "no such file or directory")
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("runtime-down error spans lines: %q", err)
	}
	for _, args := range [][]string{{"pods"}, {"images"}, {"inspect", "abc"}, {"version"}} {
		if err := c.mustFail(args, "runtime not reachable at "+c.ep); strings.HasPrefix(err.Error(), "listing") {
			t.Errorf("crictl %v: %q carries command context", args, err)
		}
	}
}

// TestBinary runs the built nodekit binary as `crictl` through a symlink: it reads the endpoint from a
// config file, lists pods, and exits 1 with one line on stderr when the runtime is down, and with the
// remote status for exec.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nodekit binary")
	}
	rt := fw.Start(t, fw.Options{})
	dir := t.TempDir()
	mod, err := build.FindModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "nodekit")
	gobuild := exec.Command("go", "build", "-o", bin, "./cmd/nodekit")
	gobuild.Dir = mod
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/nodekit: %v\n%s", err, out)
	}
	link := filepath.Join(dir, "crictl")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "crictl.yaml", "runtime-endpoint: "+rt.Endpoint()+"\ntimeout: 30\n")
	pod := rt.RunDemoPod(t, "bin-"+suffix())

	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(link, args...)
		cmd.Env = append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT=", "CRI_CONFIG_FILE=")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	out, stderr, code := run("--config", cfg, "pods", "-q")
	if code != 0 || strings.TrimSpace(out) != pod.SandboxID {
		t.Errorf("crictl --config pods -q: %q %q exit %d", out, stderr, code)
	}
	_, _, code = run("--config", cfg, "exec", "-s", pod.ContainerID, "false")
	if code != 1 {
		t.Errorf("crictl exec -s false: exit %d, want 1", code)
	}
	out, stderr, code = run("-r", "unix://"+filepath.Join(dir, "down.sock"), "ps")
	if code != 1 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "runtime not reachable at unix://"+filepath.Join(dir, "down.sock")) {
		t.Errorf("runtime down: stdout %q stderr %q exit %d; want one stderr line and exit 1", out, stderr, code)
	}
}
