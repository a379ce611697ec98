package crictl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	testPodConfig = "metadata: {name: web, namespace: default, uid: u1}\n"
	testCtrConfig = `{"metadata": {"name": "srv"}, "image": {"image": "demo:1", "annotations": {"a": "b"}},
  "mounts": [{"container_path": "/data", "image": {"image": "data:1"}}]}`
)

func newLifecycle() (*fakeLifecycle, *fakeImages, criClient) {
	rt := &fakeLifecycle{fakeRuntime: demoRuntime(time.Now())}
	img := &fakeImages{}
	return rt, img, criClient{rt: rt, img: img}
}

// TestRunVerb: run pulls the container's image and its image volume (unless --no-pull), runs the
// sandbox with the runtime handler, creates the container in it with the pod config, starts it and
// prints the container ID only.
func TestRunVerb(t *testing.T) {
	rt, img, cl := newLifecycle()
	var out, errOut bytes.Buffer
	o := runOptions{containerConfig: writeFile(t, "ctr.json", testCtrConfig), podConfig: writeFile(t, "pod.yaml", testPodConfig),
		handler: "runc", timeout: time.Second, runTimeout: time.Second, containerPull: containerPull{byDefault: true}}
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err != nil {
		t.Fatal(err)
	}
	if len(rt.runs) != 1 || rt.runs[0].GetRuntimeHandler() != "runc" || rt.runs[0].GetConfig().GetMetadata().GetName() != "web" {
		t.Fatalf("RunPodSandbox requests: %v", rt.runs)
	}
	podID := strings.Repeat("0", 63) + "1"
	if len(rt.creates) != 1 || rt.creates[0].GetPodSandboxId() != podID || rt.creates[0].GetSandboxConfig().GetMetadata().GetUid() != "u1" ||
		rt.creates[0].GetConfig().GetImage().GetUserSpecifiedImage() != "demo:1" {
		t.Fatalf("CreateContainer requests: %v", rt.creates)
	}
	ctrID := "c" + strings.Repeat("0", 62) + "1"
	if len(rt.starts) != 1 || rt.starts[0] != ctrID || out.String() != ctrID+"\n" {
		t.Errorf("started %v, printed %q; want %s", rt.starts, out.String(), ctrID)
	}
	if len(img.pulls) != 2 || img.pulls[0].GetImage().GetImage() != "demo:1" || img.pulls[1].GetImage().GetImage() != "data:1" ||
		img.pulls[0].GetImage().GetAnnotations()["a"] != "b" || img.pulls[0].GetSandboxConfig().GetMetadata().GetName() != "web" {
		t.Errorf("pulls: %v", img.pulls)
	}

	// disable-pull-on-run (byDefault false) and --no-pull skip the pull; both flags together are refused.
	o.byDefault, img.pulls = false, nil
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err != nil || len(img.pulls) != 0 {
		t.Errorf("disable-pull-on-run: err %v, pulls %v", err, img.pulls)
	}
	o.noPull, o.withPull = true, true
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err == nil || !strings.Contains(err.Error(), "--no-pull and --with-pull") {
		t.Errorf("--no-pull --with-pull: %v", err)
	}

	// A failed start names the sandbox left behind.
	o.noPull, o.withPull = false, false
	rt.startErr = errors.New("boom")
	err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut})
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "crictl rmp -f "+strings.Repeat("0", 63)+"3)") {
		t.Errorf("failed start: %v", err)
	}

	// A bad container config is reported before anything runs.
	o.containerConfig = writeFile(t, "bad.json", `{"metadata": {"name": "x"}}`)
	before := len(rt.runs)
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err == nil || !strings.Contains(err.Error(), "field image.image: required") || len(rt.runs) != before {
		t.Errorf("bad container config: %v (runs %d → %d)", err, before, len(rt.runs))
	}
}

// TestPullUsername: --username reads the password (the first line of a non-terminal stdin) after an
// "Enter Password:" prompt on stderr and wins over --creds; --creds and --auth conflict.
func TestPullUsername(t *testing.T) {
	_, img, cl := newLifecycle()
	var out, errOut bytes.Buffer
	o := pullOptions{ref: "demo:1", pullFlags: pullFlags{username: "me", creds: "x:y", in: strings.NewReader("s3cret\nrest\n"), prompt: &errOut}}
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err != nil {
		t.Fatal(err)
	}
	if a := img.pulls[0].GetAuth(); a.GetUsername() != "me" || a.GetPassword() != "s3cret" {
		t.Errorf("auth = %v", a)
	}
	if errOut.String() != "Enter Password:\n" || out.String() != "Image is up to date for sha256:demo:1\n" {
		t.Errorf("stderr %q, stdout %q", errOut.String(), out.String())
	}
	o.in = strings.NewReader("")
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err == nil || !strings.Contains(err.Error(), "--username me: reading the password: standard input is empty") {
		t.Errorf("empty stdin: %v", err)
	}
	o.username, o.auth = "", "eDp5"
	if err := o.run(context.Background(), cl, streams{out: &out, errOut: &errOut}); err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Errorf("--creds with --auth: %v", err)
	}
}

// TestPullFlagsEnvAndAliases: CRICTL_PULL_TIMEOUT, CRICTL_CREDS and CRICTL_AUTH fill the flags unless
// given; --pt and one-dash -pt are --pull-timeout; a bad environment value names the variable.
func TestPullFlagsEnvAndAliases(t *testing.T) {
	pull := findCommand((&app{}).tree(), "pull")
	fs := pull.Flags()
	t.Setenv("CRICTL_PULL_TIMEOUT", "7s")
	t.Setenv("CRICTL_CREDS", "u:p")
	t.Setenv("CRICTL_AUTH", "")
	args := singleDashLong(fs, []string{"-pt", "3s", "-a", "k=v", "img", "--", "-pt"})
	if want := "--pt 3s -a k=v img -- -pt"; strings.Join(args, " ") != want {
		t.Errorf("singleDashLong = %q, want %q", args, want)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if v := fs.Lookup("pull-timeout").Value.String(); v != "3s" {
		t.Errorf("--pull-timeout = %s, want the flag's 3s over the environment's 7s", v)
	}
	if v := fs.Lookup("creds").Value.String(); v != "u:p" {
		t.Errorf("--creds = %q, want CRICTL_CREDS", v)
	}
	if v := fs.Lookup("auth").Value.String(); v != "" {
		t.Errorf("--auth = %q from an empty CRICTL_AUTH", v)
	}
	other := findCommand((&app{}).tree(), "create").Flags()
	t.Setenv("CRICTL_PULL_TIMEOUT", "soon")
	if err := applyEnv(other); err == nil || !strings.Contains(err.Error(), `environment variable CRICTL_PULL_TIMEOUT="soon" (for --pull-timeout)`) {
		t.Errorf("bad CRICTL_PULL_TIMEOUT: %v", err)
	}
	// Shorthand groups stay shorthands.
	exec := findCommand((&app{}).tree(), "exec").Flags()
	if got := singleDashLong(exec, []string{"-it", "-sync", "x"}); strings.Join(got, " ") != "-it --sync x" {
		t.Errorf("exec: %q", got)
	}
}

// TestCheckpointVerb: the archive path is made absolute; an Unimplemented answer says the runtime does
// not support checkpointing; --export is required.
func TestCheckpointVerb(t *testing.T) {
	rt, _, cl := newLifecycle()
	var out bytes.Buffer
	o := checkpointOptions{prefixes: []string{"0202"}, export: "cp.tar"}
	if err := o.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if len(rt.checkpoint) != 1 || rt.checkpoint[0].GetContainerId() != strings.Repeat("02", 32) || rt.checkpoint[0].GetLocation() != filepath.Join(wd, "cp.tar") {
		t.Errorf("checkpoint requests %v", rt.checkpoint)
	}
	if out.String() != strings.Repeat("02", 32)+"\n" {
		t.Errorf("printed %q", out.String())
	}
	rt.unimplemented = true
	err := o.run(context.Background(), cl, &out)
	if err == nil || !strings.Contains(err.Error(), "the runtime does not support checkpointing containers (it answers CRI CheckpointContainer with Unimplemented") {
		t.Errorf("unimplemented: %v", err)
	}
	o.export = ""
	if err := o.run(context.Background(), cl, &out); err == nil || !strings.Contains(err.Error(), "--export=") {
		t.Errorf("no --export: %v", err)
	}
}

// TestRuntimeConfigVerbs: runtime-config prints the cgroup driver as upstream aligns it;
// update-runtime-config validates and sends the pod CIDR.
func TestRuntimeConfigVerbs(t *testing.T) {
	rt, _, cl := newLifecycle()
	var out, errOut bytes.Buffer
	if err := runtimeConfig(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "cgroup driver:   CGROUPFS\n" {
		t.Errorf("runtime-config = %q", out.String())
	}
	o := updateRuntimeConfigOptions{podCIDR: "10.244.1.0/24,fd00::/64", podCIDRSet: true}
	if err := o.run(context.Background(), cl, &errOut); err != nil {
		t.Fatal(err)
	}
	if len(rt.updates) != 1 || rt.updates[0].GetRuntimeConfig().GetNetworkConfig().GetPodCidr() != "10.244.1.0/24,fd00::/64" || errOut.String() != "Runtime config successfully updated\n" {
		t.Errorf("updates %v, stderr %q", rt.updates, errOut.String())
	}
	o.podCIDR = "10.244.1.0"
	if err := o.run(context.Background(), cl, &errOut); err == nil || !strings.Contains(err.Error(), `--pod-cidr "10.244.1.0": "10.244.1.0" is not a CIDR`) || len(rt.updates) != 1 {
		t.Errorf("bad CIDR: %v", err)
	}
	if err := (&updateRuntimeConfigOptions{}).run(context.Background(), cl, &errOut); err == nil || !strings.Contains(err.Error(), "give --pod-cidr") {
		t.Errorf("no flag: %v", err)
	}
	rt.unimplemented = true
	if err := runtimeConfig(context.Background(), cl, &out); err == nil || !strings.Contains(err.Error(), "does not support reporting its configuration") {
		t.Errorf("unimplemented RuntimeConfig: %v", err)
	}
}

// TestMetricsVerbs: metricsp and metricdescs print the list responses as JSON (default) or YAML.
func TestMetricsVerbs(t *testing.T) {
	rt, _, cl := newLifecycle()
	var out bytes.Buffer
	o := metricsOptions{output: formatJSON}
	if err := o.podMetrics(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	var m struct {
		PodMetrics []struct {
			PodSandboxID string `json:"podSandboxId"`
			Metrics      []struct {
				Name       string
				MetricType string
				Value      struct{ Value string }
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(m.PodMetrics) != 1 || m.PodMetrics[0].PodSandboxID != "p1" || m.PodMetrics[0].Metrics[0].MetricType != "COUNTER" || m.PodMetrics[0].Metrics[0].Value.Value != "7" {
		t.Errorf("metricsp = %s", out.String())
	}
	out.Reset()
	o.output = formatYAML
	if err := o.descriptors(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	if want := "descriptors:\n- help: CPU\n  labelKeys:\n  - id\n  name: container_cpu_usage_seconds_total\n\n"; out.String() != want {
		t.Errorf("metricdescs -o yaml = %q, want %q", out.String(), want)
	}
	o.output = "table"
	if err := o.descriptors(context.Background(), cl, &out); err == nil || !strings.Contains(err.Error(), `unsupported format "table"`) {
		t.Errorf("-o table: %v", err)
	}
	rt.unimplemented = true
	o.output = formatJSON
	if err := o.podMetrics(context.Background(), cl, &out); err == nil || !strings.Contains(err.Error(), "does not support pod metrics") {
		t.Errorf("unimplemented: %v", err)
	}
}

// TestInspectiFilters: without IDs, inspecti shows the images --name and --filter select.
func TestInspectiFilters(t *testing.T) {
	_, img, cl := newLifecycle()
	img.images = []*runtimeapi.Image{
		{Id: "sha256:" + strings.Repeat("a", 64), RepoTags: []string{"demo:1"}, Size: 1000},
		{Id: "sha256:" + strings.Repeat("b", 64), RepoTags: []string{"other:2"}, Size: 2000},
		{Id: "sha256:" + strings.Repeat("c", 64)},
	}
	var out bytes.Buffer
	o := inspectiOptions{statusFlags: statusFlags{output: formatGoTemplate, template: "{{.status.id}}"}, name: "demo"}
	if err := o.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != img.images[0].Id+"\n" {
		t.Errorf("--name demo: %q", out.String())
	}
	out.Reset()
	o.name, o.filters, o.output = "", []string{"dangling=true"}, formatTable
	if err := o.run(context.Background(), cl, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "ID: sha256:ccc") || strings.Contains(out.String(), "aaaa") {
		t.Errorf("-f dangling=true: %q", out.String())
	}
	o.filters = []string{"reference=^nothing"}
	if err := o.run(context.Background(), cl, &out); err == nil || !strings.Contains(err.Error(), "no image matches") {
		t.Errorf("no match: %v", err)
	}
}

// TestConfigRoundTrip: --set (comma-separated and repeated), the positional form, --get and --list on a
// file that keeps its comments; bad keys and values are errors naming them; a missing file is created.
func TestConfigRoundTrip(t *testing.T) {
	path := writeFile(t, "crictl.yaml", "# site config\ntimeout: 9 # seconds\n")
	var out bytes.Buffer
	run := func(o configOptions) error {
		o.path = path
		out.Reset()
		return o.run(&out)
	}
	if err := run(configOptions{sets: []string{"runtime-endpoint=unix:///run/x.sock,debug=true", "max-retries=-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := run(configOptions{args: []string{"pull-image-on-create", "true"}}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	want := "# site config\ntimeout: 9 # seconds\nruntime-endpoint: unix:///run/x.sock\nimage-endpoint: \"\"\ndebug: true\npull-image-on-create: true\ndisable-pull-on-run: false\nmax-retries: -1\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
	s, err := readSettings(path)
	if err != nil || s.RuntimeEndpoint != "unix:///run/x.sock" || s.Timeout != 9*time.Second || !s.Debug || s.MaxRetries != -1 {
		t.Errorf("read back %+v, %v", s, err)
	}
	if err := run(configOptions{get: "timeout"}); err != nil || out.String() != "9\n" {
		t.Errorf("--get timeout: %q %v", out.String(), err)
	}
	if err := run(configOptions{list: true}); err != nil {
		t.Fatal(err)
	}
	// The widest key, pull-image-on-create, sets the column: 20 characters and 3 of padding.
	if !strings.HasPrefix(out.String(), "KEY                    VALUE\nruntime-endpoint       unix:///run/x.sock\n") || !strings.Contains(out.String(), "\nmax-retries            -1\n") {
		t.Errorf("--list:\n%s", out.String())
	}
	for _, tc := range []struct {
		o    configOptions
		want string
	}{
		{configOptions{get: "nope"}, `no configuration option named "nope"`},
		{configOptions{sets: []string{"timeout=abc"}}, `option timeout: "abc": invalid syntax`},
		{configOptions{sets: []string{"debug"}}, `--set "debug": want KEY=VALUE`},
		{configOptions{args: []string{"debug"}}, "want KEY VALUE"},
	} {
		if err := run(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	path = filepath.Join(t.TempDir(), "new", "crictl.yaml")
	if err := run(configOptions{args: []string{"timeout", "4"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("created file: %v %v", st, err)
	}
	if s, err := readSettings(path); err != nil || s.Timeout != 4*time.Second {
		t.Errorf("created file reads %+v %v", s, err)
	}
}

// TestMaxRetries: the default is 3 without a config file and 0 with one that does not set it; a
// socket that appears after a while is waited for; retries 0 do not wait; a cancelled context ends the
// wait.
func TestMaxRetries(t *testing.T) {
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "")
	t.Setenv("CRI_CONFIG_FILE", "")
	a, err := resolveArgs(t, "-c", filepath.Join(t.TempDir(), "none.yaml"), "-r", "unix:///x.sock")
	if err == nil {
		t.Fatalf("missing explicit config file accepted: %+v", a.cfg)
	}
	a, err = resolveArgs(t, "-c", "/nonexistent-default", "-r", "unix:///x.sock")
	if err == nil {
		t.Fatal("missing explicit config file accepted")
	}
	cfg := writeFile(t, "crictl.yaml", "timeout: 3\n")
	if a, err = resolveArgs(t, "-c", cfg, "-r", "unix:///x.sock"); err != nil || a.cfg.MaxRetries != 0 || !a.explicitEndpoint {
		t.Errorf("file without max-retries: %+v %v", a.cfg, err)
	}
	if a, err = resolveArgs(t, "-c", cfg, "-max-retries", "5"); err != nil || a.cfg.MaxRetries != 5 || a.explicitEndpoint {
		t.Errorf("-max-retries 5: %+v %v", a.cfg, err)
	}

	sock := filepath.Join(t.TempDir(), "late.sock")
	start := time.Now()
	if err := waitForSockets(context.Background(), 0, "unix://"+sock, ""); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Errorf("0 retries waited %v (%v)", time.Since(start), err)
	}
	listening := make(chan net.Listener, 1)
	time.AfterFunc(700*time.Millisecond, func() {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Error(err)
		}
		listening <- l
	})
	if err := waitForSockets(context.Background(), 3, "unix://"+sock, "unix://"+sock); err != nil {
		t.Fatal(err)
	}
	l := <-listening
	defer l.Close()
	// Attempts at 0, 0.5 s and 1.5 s: the third finds the socket created at 0.7 s.
	if d := time.Since(start); d < 1400*time.Millisecond || d > 3*time.Second {
		t.Errorf("waited %v for a socket that appeared after 0.7 s, want the third attempt at 1.5 s", d)
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitForSockets(c, -1, "unix://"+filepath.Join(t.TempDir(), "never.sock"), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
}

// TestContainerTimes: inspect renders an unset creation time as the epoch and the start and finish
// times that do not apply to the state as the zero time, as upstream does.
func TestContainerTimes(t *testing.T) {
	epoch := time.Unix(0, 0).Format(time.RFC3339Nano)
	zero := time.Time{}.Format(time.RFC3339Nano)
	for _, tc := range []struct {
		st                         *runtimeapi.ContainerStatus
		created, started, finished string
	}{
		{&runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_CREATED}, epoch, zero, zero},
		{&runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 5e9, StartedAt: 6e9},
			time.Unix(5, 0).Format(time.RFC3339Nano), time.Unix(6, 0).Format(time.RFC3339Nano), zero},
		{&runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED}, epoch, epoch, epoch},
		{&runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_UNKNOWN}, epoch, epoch, zero},
	} {
		ts := containerTimes(tc.st)
		got := []string{ts["createdAt"].Format(time.RFC3339Nano), ts["startedAt"].Format(time.RFC3339Nano), ts["finishedAt"].Format(time.RFC3339Nano)}
		if want := []string{tc.created, tc.started, tc.finished}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%v: times %v, want %v", tc.st.GetState(), got, want)
		}
	}
}

// TestJSONSchemaAndCompletion: jsonschema prints a schema whose properties are the config files' field
// names; completion prints a script for each shell and refuses others.
func TestJSONSchemaAndCompletion(t *testing.T) {
	var out bytes.Buffer
	if err := printJSONSchema(&out, &runtimeapi.ContainerConfig{}); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Ref  string `json:"$ref"`
		Defs map[string]struct {
			Properties map[string]map[string]any
		} `json:"$defs"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	cc := s.Defs["ContainerConfig"].Properties
	if s.Ref != "#/$defs/ContainerConfig" || cc["log_path"]["type"] != "string" || cc["mounts"]["type"] != "array" ||
		s.Defs["Mount"].Properties["propagation"]["description"] != "MountPropagation (0=PROPAGATION_PRIVATE, 1=PROPAGATION_HOST_TO_CONTAINER, 2=PROPAGATION_BIDIRECTIONAL)" {
		t.Errorf("schema: ref %s, ContainerConfig %v, Mount %v", s.Ref, cc["log_path"], s.Defs["Mount"].Properties["propagation"])
	}
	for shell, marker := range map[string]string{"bash": "complete -o default -F __start_crictl crictl", "zsh": "#compdef crictl", "fish": "complete -c crictl"} {
		out.Reset()
		err := Run(context.Background(), []string{"completion", shell}, nil, &out, &out)
		if err != nil || !strings.Contains(out.String(), marker) {
			t.Errorf("completion %s: %v; output lacks %q", shell, err, marker)
		}
	}
	if err := Run(context.Background(), []string{"completion", "tcsh"}, nil, &out, &out); err == nil || !strings.Contains(err.Error(), `unsupported shell "tcsh"`) {
		t.Errorf("completion tcsh: %v", err)
	}
}
