package crictl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/crictl"
	fw "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestRunAndRuntimeCalls runs the commands crictl v1.37 added over the earlier set against real
// containerd: run (sandbox, container and start in one step), checkpoint, metricsp, metricdescs,
// runtime-config and update-runtime-config. containerd 1.6 serves none of checkpoint, the metrics or
// RuntimeConfig: each must say so in one line naming the call.
func TestRunAndRuntimeCalls(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	c := cli{t: t, ep: rt.Endpoint()}
	v := rt.Supervisor.Version()
	old := v.Major == 1 && v.Minor < 7 // containerd 1.6: CRI v1 without the calls added since Kubernetes 1.27
	t.Logf("containerd %s", v)
	name, ns := "run-"+suffix(), "crictl-e2e"
	podFile, ctrFile := podConfigs(t, rt, name, ns)

	// The images are imported, not in a registry: --no-pull (run pulls by default).
	ctrID := strings.TrimSpace(c.must("run", "--no-pull", ctrFile, podFile))
	if !hexID.MatchString(ctrID) {
		t.Fatalf("run printed %q, want only the container ID", ctrID)
	}
	podID := strings.TrimSpace(c.must("pods", "-q", "--name", "^"+name+"$"))
	if !hexID.MatchString(podID) {
		t.Fatalf("run left no pod named %s: %q", name, podID)
	}
	state := strings.TrimSpace(c.must("inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.labels.tier}}", ctrID))
	if state != "CONTAINER_RUNNING web" {
		t.Errorf("the container run started is %q, want CONTAINER_RUNNING with the config's labels", state)
	}
	if got := strings.TrimSpace(c.must("ps", "-q", "--pod", podID)); got != ctrID {
		t.Errorf("ps --pod %s = %q, want the container run started", podID[:13], got)
	}
	ip := strings.TrimSpace(c.must("inspectp", "-o", "go-template", "--template", "{{.status.network.ip}}", podID))
	if body := fw.HTTPGet(t, "http://"+ip+":8080/"); !strings.Contains(body, name) {
		t.Errorf("GET / from the pod run started = %q, want it to name the pod %s", body, name)
	}

	t.Run("run with a bad config leaves nothing", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		bad := writeFile(t, t.TempDir(), "ctr.json", `{"metadata": {"name": "x"}, "image": {"image": 5}}`)
		before := c.must("pods", "-q")
		c.mustFail([]string{"run", "--no-pull", bad, podFile}, bad+":1:48: field image.image: want a string, got the number 5")
		if after := c.must("pods", "-q"); after != before {
			t.Errorf("pods before %q, after a refused run %q", before, after)
		}
	})

	t.Run("checkpoint", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		archive := filepath.Join(t.TempDir(), "cp.tar")
		out, _, err := c.run("checkpoint", "--export", archive, ctrID[:12])
		t.Logf("checkpoint: %q, %v", out, err)
		switch {
		case old:
			oneLine(t, "checkpoint on containerd "+v.String(), err)
			if err == nil || !strings.Contains(err.Error(), "the runtime does not support checkpointing containers (it answers CRI CheckpointContainer with Unimplemented") ||
				!strings.Contains(err.Error(), ctrID) {
				t.Errorf("checkpoint on containerd %s: %v; want the clear Unimplemented error naming the container", v, err)
			}
		case err == nil:
			if st, serr := os.Stat(archive); serr != nil || st.Size() == 0 || strings.TrimSpace(out) != ctrID {
				t.Errorf("checkpoint printed %q; archive %v %v", out, st, serr)
			}
		default: // containerd 2 without CRIU: its own error, in one line naming the container
			oneLine(t, "checkpoint", err)
			if !strings.Contains(err.Error(), "checkpointing the container \""+ctrID) {
				t.Errorf("checkpoint: %v", err)
			}
		}
		c.mustFail([]string{"checkpoint", ctrID}, "--export=/path/to/checkpoint.tar")
	})

	t.Run("metricsp and metricdescs", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		for _, tc := range []struct{ cmd, call, what, key string }{
			{"metricsp", "ListPodSandboxMetrics", "pod metrics", "podMetrics"},
			{"metricdescs", "ListMetricDescriptors", "metric descriptors", "descriptors"},
		} {
			out, _, err := c.run(tc.cmd)
			t.Logf("%s: %q, %v", tc.cmd, out, err)
			if old {
				oneLine(t, tc.cmd, err)
				if want := "the runtime does not support " + tc.what + " (it answers CRI " + tc.call + " with Unimplemented"; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s on containerd %s: %v; want %q", tc.cmd, v, err, want)
				}
				continue
			}
			if err != nil {
				oneLine(t, tc.cmd, err)
				continue
			}
			var doc map[string]any
			if jerr := json.Unmarshal([]byte(out), &doc); jerr != nil || doc[tc.key] == nil {
				t.Errorf("%s: %q is not a list response with %s (%v)", tc.cmd, out, tc.key, jerr)
			}
		}
		c.mustFail([]string{"metricsp", "-o", "table"}, `unsupported format "table"`)
	})

	t.Run("runtime-config and update-runtime-config", func(t *testing.T) {
		c := cli{t: t, ep: c.ep}
		out, _, err := c.run("runtime-config")
		t.Logf("runtime-config: %q, %v", out, err)
		if old {
			oneLine(t, "runtime-config", err)
			if err == nil || !strings.Contains(err.Error(), "the runtime does not support reporting its configuration (it answers CRI RuntimeConfig with Unimplemented") {
				t.Errorf("runtime-config on containerd %s: %v", v, err)
			}
		} else if err != nil || !regexp.MustCompile(`^cgroup driver:   (SYSTEMD|CGROUPFS)\n$`).MatchString(out) {
			t.Errorf("runtime-config = %q, %v", out, err)
		}
		// containerd takes a pod CIDR (it renders its CNI config template with it when one is set).
		_, errOut, err := c.run("update-runtime-config", "-p", "10.213.250.0/24")
		if err != nil || errOut != "Runtime config successfully updated\n" {
			t.Errorf("update-runtime-config: %v, stderr %q", err, errOut)
		}
		c.mustFail([]string{"update-runtime-config", "--pod-cidr", "10.213.250.0"}, `"10.213.250.0" is not a CIDR`)
	})

	c.must("rmp", "-f", podID)
	if out := c.must("pods", "-q"); strings.Contains(out, podID) {
		t.Errorf("pod %s left after rmp -f: %q", podID, out)
	}
	if out := c.must("ps", "-a", "-q"); strings.Contains(out, ctrID) {
		t.Errorf("container %s left after rmp -f: %q", ctrID, out)
	}
}

// TestConfigCommand: `crictl config --set` writes the config file that later invocations read their
// endpoint from (no -r), `--get` and `--list` read it back, and CRI_CONFIG_FILE names the file as
// --config does.
func TestConfigCommand(t *testing.T) {
	rt := fw.Start(t, fw.Options{})
	pod := rt.RunDemoPod(t, "cfg-"+suffix())
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "")
	t.Setenv("IMAGE_SERVICE_ENDPOINT", "")
	t.Setenv("CRI_CONFIG_FILE", "")
	cfg := filepath.Join(t.TempDir(), "etc", "crictl.yaml")
	run := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := crictl.Run(ctx, args, strings.NewReader(""), &out, &errOut)
		return out.String(), err
	}
	if _, err := run("-c", cfg, "config", "--set", "runtime-endpoint="+rt.Endpoint()+",timeout=30", "--set", "max-retries=0"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("-c", cfg, "config", "--get", "runtime-endpoint"); err != nil || out != rt.Endpoint()+"\n" {
		t.Errorf("config --get runtime-endpoint = %q, %v", out, err)
	}
	if out, err := run("-c", cfg, "config", "timeout", "20"); err != nil || out != "" {
		t.Errorf("config timeout 20: %q %v", out, err)
	}
	out, err := run("-c", cfg, "config", "--list")
	if err != nil {
		t.Fatal(err)
	}
	header, rows := tableRows(t, out)
	if strings.Join(header, "|") != "KEY|VALUE" || findRow(rows, 0, "timeout")[1] != "20" || findRow(rows, 0, "runtime-endpoint")[1] != rt.Endpoint() {
		t.Errorf("config --list:\n%s", out)
	}
	if out, err := run("-c", cfg, "pods", "-q"); err != nil || strings.TrimSpace(out) != pod.SandboxID {
		t.Errorf("pods -q with the endpoint from the file written by config: %q, %v", out, err)
	}
	t.Setenv("CRI_CONFIG_FILE", cfg)
	if out, err := run("ps", "-q"); err != nil || strings.TrimSpace(out) != pod.ContainerID {
		t.Errorf("ps -q with CRI_CONFIG_FILE: %q, %v", out, err)
	}
	if _, err := run("config", "--set", "timeout=soon"); err == nil || !strings.Contains(err.Error(), `option timeout: "soon"`) {
		t.Errorf("config --set timeout=soon: %v", err)
	}
	if out, err := run("config", "--get", "timeout"); err != nil || out != "20\n" {
		t.Errorf("a refused --set changed the file: timeout %q, %v", out, err)
	}
}
