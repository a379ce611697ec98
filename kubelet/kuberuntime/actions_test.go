package kuberuntime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func testPod(policy v1.RestartPolicy, inits []v1.Container, names ...string) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: policy, InitContainers: inits}}
	p.UID = "uid"
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img"})
	}
	return p
}

func withEphemeral(p *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "img"}})
	}
	return p
}

func readySandbox(attempt uint32) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt}}
}

func ctr(pod *v1.Pod, name string, state runtimeapi.ContainerState, exit int32, age time.Duration) *ContainerStatus {
	spec := specByName(pod)[name]
	return &ContainerStatus{ID: name + "-" + age.String(), Name: name, State: state, ExitCode: exit,
		Hash: containerHash(spec), CreatedAt: time.Unix(1000, 0).Add(-age)}
}

var (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

func noUnhealthy(string) (FailedProbe, bool) { return "", false }

func TestComputePodActions(t *testing.T) {
	m := &Manager{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	always := v1.ContainerRestartPolicyAlways
	initPod := func(policy v1.RestartPolicy) *v1.Pod {
		return testPod(policy, []v1.Container{{Name: "i1", Image: "img"}, {Name: "side", Image: "img", RestartPolicy: &always}, {Name: "i2", Image: "img"}}, "app")
	}
	cases := []struct {
		name  string
		pod   *v1.Pod
		state func(p *v1.Pod) *PodStatus
		want  podActions
	}{
		{"new pod: sandbox and all app containers", testPod(v1.RestartPolicyAlways, nil, "a", "b"),
			func(p *v1.Pod) *PodStatus { return &PodStatus{} },
			podActions{CreateSandbox: true, ContainersToStart: []int{0, 1}}},
		{"dead sandbox: kill, new sandbox with next attempt", testPod(v1.RestartPolicyAlways, nil, "a"),
			func(p *v1.Pod) *PodStatus {
				sb := readySandbox(2)
				sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb}, ContainerStatuses: []*ContainerStatus{ctr(p, "a", exited, 0, 0)}}
			},
			podActions{KillPod: true, CreateSandbox: true, Attempt: 3, ContainersToStart: []int{0}}},
		{"dead sandbox, Never, containers ran: no new sandbox", testPod(v1.RestartPolicyNever, nil, "a"),
			func(p *v1.Pod) *PodStatus {
				sb := readySandbox(0)
				sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb}, ContainerStatuses: []*ContainerStatus{ctr(p, "a", exited, 1, 0)}}
			},
			podActions{KillPod: true}},
		{"two ready sandboxes: kill, one new sandbox past both", testPod(v1.RestartPolicyAlways, nil, "a"),
			func(p *v1.Pod) *PodStatus {
				extra := readySandbox(1)
				extra.Id = "sb-extra"
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{extra, readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "a", running, 0, 0)}}
			},
			podActions{KillPod: true, CreateSandbox: true, Attempt: 2, ContainersToStart: []int{0}}},
		{"failed sandboxes listed without a creation time: the attempt goes past all", testPod(v1.RestartPolicyAlways, nil, "a"),
			func(p *v1.Pod) *PodStatus {
				newest, failed := readySandbox(1), readySandbox(3)
				newest.State, failed.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{newest, failed}}
			},
			podActions{KillPod: true, CreateSandbox: true, Attempt: 4, ContainersToStart: []int{0}}},
		{"running and unchanged: nothing", testPod(v1.RestartPolicyAlways, nil, "a"),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "a", running, 0, 0)}}
			},
			podActions{SandboxID: "sb"}},
		{"OnFailure restarts a failure, not a success", testPod(v1.RestartPolicyOnFailure, nil, "ok", "bad"),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)},
					ContainerStatuses: []*ContainerStatus{ctr(p, "ok", exited, 0, 0), ctr(p, "bad", exited, 2, 0)}}
			},
			podActions{SandboxID: "sb", ContainersToStart: []int{1}}},
		{"Never restarts nothing", testPod(v1.RestartPolicyNever, nil, "bad"),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "bad", exited, 2, 0)}}
			},
			podActions{SandboxID: "sb"}},
		{"init: first one runs first", initPod(v1.RestartPolicyAlways),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}}
			},
			podActions{SandboxID: "sb", InitToStart: []int{0}}},
		{"init: wait for a running one", initPod(v1.RestartPolicyAlways),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "i1", running, 0, 0)}}
			},
			podActions{SandboxID: "sb"}},
		{"init: sidecar after the first completes, and waits for it", initPod(v1.RestartPolicyAlways),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "i1", exited, 0, 0)}}
			},
			podActions{SandboxID: "sb", InitToStart: []int{1}}},
		{"init: next regular one once the sidecar runs", initPod(v1.RestartPolicyAlways),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)},
					ContainerStatuses: []*ContainerStatus{ctr(p, "i1", exited, 0, 0), ctr(p, "side", running, 0, 0)}}
			},
			podActions{SandboxID: "sb", InitToStart: []int{2}}},
		{"init done: app starts", initPod(v1.RestartPolicyAlways),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)},
					ContainerStatuses: []*ContainerStatus{ctr(p, "i1", exited, 0, 0), ctr(p, "side", running, 0, 0), ctr(p, "i2", exited, 0, 0)}}
			},
			podActions{SandboxID: "sb", ContainersToStart: []int{0}}},
		{"init failed, Never: pod is killed", initPod(v1.RestartPolicyNever),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "i1", exited, 1, 0)}}
			},
			podActions{SandboxID: "sb", KillPod: true}},
		{"init failed, OnFailure: retried", initPod(v1.RestartPolicyOnFailure),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "i1", exited, 1, 0)}}
			},
			podActions{SandboxID: "sb", InitToStart: []int{0}}},
		{"dead sidecar restarts after init, app untouched", initPod(v1.RestartPolicyAlways),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)},
					ContainerStatuses: []*ContainerStatus{ctr(p, "app", running, 0, 0), ctr(p, "side", exited, 1, 0)}}
			},
			podActions{SandboxID: "sb", InitToStart: []int{1}}},
		{"ephemeral containers: the new one starts, an exited one never restarts", withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "done", "new"),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)},
					ContainerStatuses: []*ContainerStatus{ctr(p, "app", running, 0, 0), ctr(p, "done", exited, 1, 0)}}
			},
			podActions{SandboxID: "sb", EphemeralToStart: []int{1}}},
		{"ephemeral containers start while init containers run", withEphemeral(initPod(v1.RestartPolicyAlways), "dbg"),
			func(p *v1.Pod) *PodStatus {
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(p, "i1", running, 0, 0)}}
			},
			podActions{SandboxID: "sb", EphemeralToStart: []int{0}}},
		{"new sandbox: ephemeral containers are not started again", withEphemeral(testPod(v1.RestartPolicyAlways, nil, "a"), "dbg"),
			func(p *v1.Pod) *PodStatus {
				sb := readySandbox(0)
				sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				return &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb}, ContainerStatuses: []*ContainerStatus{ctr(p, "a", exited, 0, 0), ctr(p, "dbg", exited, 0, 0)}}
			},
			podActions{KillPod: true, CreateSandbox: true, Attempt: 1, ContainersToStart: []int{0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := m.computePodActions(c.pod, c.state(c.pod), noUnhealthy)
			if len(got.ContainersToKill) == 0 {
				got.ContainersToKill = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestComputePodActionsKillsChangedAndUnhealthy(t *testing.T) {
	m := &Manager{}
	pod := testPod(v1.RestartPolicyAlways, nil, "changed", "sick", "fine")
	st := &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{
		ctr(pod, "changed", running, 0, 0), ctr(pod, "sick", running, 0, 0), ctr(pod, "fine", running, 0, 0)}}
	st.ContainerStatuses[0].Hash = "stale"
	sick := st.ContainerStatuses[1]
	sick.Runtime = "containerd"
	failedLiveness := func(id string) (FailedProbe, bool) { return LivenessProbe, id == sick.ContainerID() }
	a := m.computePodActions(pod, st, failedLiveness)
	if !reflect.DeepEqual(a.ContainersToStart, []int{0, 1}) || len(a.ContainersToKill) != 2 {
		t.Fatalf("actions %+v: want kill+start of the changed and the unhealthy container", a)
	}
	// Upstream's Killing messages (pkg/kubelet/kuberuntime computePodActions).
	if msg := a.ContainersToKill[sick.ID].message; msg != "Container sick failed liveness probe, will be restarted" {
		t.Errorf("kill message %q", msg)
	}
	if msg := a.ContainersToKill[st.ContainerStatuses[0].ID].message; msg != "Container changed definition changed, will be restarted" {
		t.Errorf("kill message %q", msg)
	}
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	a = m.computePodActions(pod, st, failedLiveness)
	if k, killed := a.ContainersToKill[sick.ID]; !killed || reflect.DeepEqual(a.ContainersToStart, []int{0, 1}) {
		t.Errorf("restartPolicy Never: the unhealthy container is killed and not restarted; got %+v", a)
	} else if k.message != "Container sick failed liveness probe" {
		t.Errorf("restartPolicy Never: kill message %q", k.message)
	}
}

// stopRecorder is a CRI runtime that records StopContainer timeouts; other calls are not expected.
type stopRecorder struct {
	runtimeapi.RuntimeServiceClient
	timeouts map[string]int64
}

func (r *stopRecorder) StopContainer(_ context.Context, in *runtimeapi.StopContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	r.timeouts[in.ContainerId] = in.Timeout
	return &runtimeapi.StopContainerResponse{}, nil
}

// TestProbeKillGracePeriod: a container killed for a failed liveness or startup probe is stopped with
// that probe's terminationGracePeriodSeconds when it sets one, else the pod's; a deleting pod's grace
// period wins; the Killing event names the probe as upstream does.
func TestProbeKillGracePeriod(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	cases := []struct {
		name              string
		probe             FailedProbe
		liveness, startup *int64 // the probes' terminationGracePeriodSeconds (nil: no probe field)
		deletionGrace     *int64
		want              int64
		event             string
	}{
		{"liveness with its own grace", LivenessProbe, i64(7), i64(9), nil, 7, "Normal Killing Container app failed liveness probe"},
		{"startup with its own grace", StartupProbe, i64(7), i64(9), nil, 9, "Normal Killing Container app failed startup probe"},
		{"probe without grace: the pod's", LivenessProbe, nil, i64(9), nil, 30, "Normal Killing Container app failed liveness probe"},
		{"deleting pod: its deletion grace", LivenessProbe, i64(7), nil, i64(12), 12, "Normal Killing Container app failed liveness probe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.TerminationGracePeriodSeconds = i64(30)
			pod.DeletionGracePeriodSeconds = c.deletionGrace
			spec := &pod.Spec.Containers[0]
			handler := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}
			spec.LivenessProbe = &v1.Probe{ProbeHandler: handler, TerminationGracePeriodSeconds: c.liveness}
			spec.StartupProbe = &v1.Probe{ProbeHandler: handler, TerminationGracePeriodSeconds: c.startup}
			st := &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(0)}, ContainerStatuses: []*ContainerStatus{ctr(pod, "app", running, 0, 0)}}
			sick := st.ContainerStatuses[0]
			sick.Runtime = "containerd"
			rt := &stopRecorder{timeouts: map[string]int64{}}
			rec := record.NewFakeRecorder(10)
			m := &Manager{opts: Options{Runtime: rt, Recorder: rec}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			pod.Spec.RestartPolicy = v1.RestartPolicyNever // kill only: nothing to start
			res := m.SyncPod(context.Background(), pod, st, func(id string) (FailedProbe, bool) { return c.probe, id == sick.ContainerID() })
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got, ok := rt.timeouts[sick.ID]; !ok || got != c.want {
				t.Errorf("StopContainer timeout = %d (called %v), want %d", got, ok, c.want)
			}
			if ev := <-rec.Events; ev != c.event {
				t.Errorf("event %q, want %q", ev, c.event)
			}
		})
	}
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"A": "1", "B": "two"}
	look := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"$(A)-$(B)": "1-two", "$$(A)": "$(A)", "$(MISSING)": "$(MISSING)", "x$": "x$", "$(A": "$(A", "$A": "$A", "": "",
	} {
		if got := ExpandVars(in, look); got != want {
			t.Errorf("ExpandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResourcesAndOOMScore(t *testing.T) {
	c := v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")}}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	r := linuxResources(pod, &pod.Spec.Containers[0], 1<<30)
	if r.CpuShares != 512 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 64<<20 || r.OomScoreAdj != -997 {
		t.Errorf("limits-only container: %+v; want shares 512 (request = limit), quota 50000/100000, 64Mi, -997", r)
	}
	r = linuxResources(&v1.Pod{}, &v1.Container{}, 1<<30)
	if r.CpuShares != 2 || r.CpuQuota != 0 || r.MemoryLimitInBytes != 0 || r.OomScoreAdj != 1000 {
		t.Errorf("best-effort container: %+v; want shares 2, no quota or memory limit, 1000", r)
	}
}

func TestPullAuths(t *testing.T) {
	secret := v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
		v1.DockerConfigJsonKey: []byte(`{"auths":{"https://reg.example:5000":{"auth":"dXNlcjpwYXNz"},"other.example":{"username":"o","password":"p"}}}`)}}
	got := pullAuths("reg.example:5000/app:v1", []v1.Secret{secret})
	if len(got) != 2 || got[0].Username != "user" || got[0].Password != "pass" || got[1] != nil {
		t.Fatalf("auths %+v: want the matching registry's credentials, then anonymous", got)
	}
	if got := pullAuths("busybox", []v1.Secret{secret}); len(got) != 1 || got[0] != nil {
		t.Errorf("docker.io image got %+v", got)
	}
}

// sandboxRecorder is a CRI runtime that records container and sandbox stops and sandbox creations;
// RunPodSandbox fails after recording (the test ends there). Other calls are not expected.
type sandboxRecorder struct {
	runtimeapi.RuntimeServiceClient
	stoppedContainers, stoppedSandboxes, removedSandboxes []string
	runAttempts                                           []uint32
}

func (r *sandboxRecorder) RemovePodSandbox(_ context.Context, in *runtimeapi.RemovePodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.removedSandboxes = append(r.removedSandboxes, in.PodSandboxId)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *sandboxRecorder) StopContainer(_ context.Context, in *runtimeapi.StopContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	r.stoppedContainers = append(r.stoppedContainers, in.ContainerId)
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *sandboxRecorder) StopPodSandbox(_ context.Context, in *runtimeapi.StopPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	r.stoppedSandboxes = append(r.stoppedSandboxes, in.PodSandboxId)
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *sandboxRecorder) RunPodSandbox(_ context.Context, in *runtimeapi.RunPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	r.runAttempts = append(r.runAttempts, in.GetConfig().GetMetadata().GetAttempt())
	return nil, errors.New("fake runtime: no sandboxes made here")
}

type dnsHelper struct{ RuntimeHelper }

func (dnsHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return &runtimeapi.DNSConfig{}, nil
}

// TestSyncPodKillsExtraReadySandbox: a pod with two ready sandboxes has its container and both
// sandboxes stopped, with upstream's SandboxChanged event, and one sandbox created with the attempt
// after the newest.
func TestSyncPodKillsExtraReadySandbox(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Name, pod.Namespace = "p", "default"
	extra := readySandbox(3)
	extra.Id = "sb-extra"
	st := &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{extra, readySandbox(2)},
		ContainerStatuses: []*ContainerStatus{ctr(pod, "app", running, 0, 0)}}
	rt := &sandboxRecorder{}
	rec := record.NewFakeRecorder(10)
	m := &Manager{opts: Options{Runtime: rt, Recorder: rec, Helper: dnsHelper{}, PodLogsDir: t.TempDir()},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	res := m.SyncPod(context.Background(), pod, st, nil)
	if res.Err == nil {
		t.Fatal("SyncPod: no error from the failing RunPodSandbox")
	}
	if !reflect.DeepEqual(rt.stoppedContainers, []string{st.ContainerStatuses[0].ID}) {
		t.Errorf("stopped containers %v, want the running one", rt.stoppedContainers)
	}
	if !reflect.DeepEqual(rt.stoppedSandboxes, []string{"sb-extra", "sb"}) {
		t.Errorf("stopped sandboxes %v, want both ready ones", rt.stoppedSandboxes)
	}
	if !reflect.DeepEqual(rt.runAttempts, []uint32{4}) {
		t.Errorf("RunPodSandbox attempts %v, want one with attempt 4", rt.runAttempts)
	}
	if ev := <-rec.Events; ev != "Normal SandboxChanged Pod sandbox changed, it will be killed and re-created." {
		t.Errorf("first event %q", ev)
	}
}

// TestSyncPodRemovesFailedSandboxes: before a new sandbox is created, the pod's dead sandboxes that hold
// no container (failed RunPodSandbox attempts) are stopped and removed; one holding the last instance
// of a container stays (for its status and logs); the new attempt goes past all of them.
func TestSyncPodRemovesFailedSandboxes(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Name, pod.Namespace = "p", "default"
	old, failed := readySandbox(1), readySandbox(5)
	old.Id, failed.Id = "old", "failed"
	old.State, failed.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	dead := ctr(pod, "app", exited, 1, 0)
	dead.SandboxID = "old"
	st := &PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{old, failed}, ContainerStatuses: []*ContainerStatus{dead}}
	rt := &sandboxRecorder{}
	m := &Manager{opts: Options{Runtime: rt, Recorder: record.NewFakeRecorder(10), Helper: dnsHelper{}, PodLogsDir: t.TempDir()},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m.SyncPod(context.Background(), pod, st, nil)
	if !reflect.DeepEqual(rt.stoppedSandboxes, []string{"failed"}) || !reflect.DeepEqual(rt.removedSandboxes, []string{"failed"}) {
		t.Errorf("stopped %v, removed %v; want the failed sandbox only", rt.stoppedSandboxes, rt.removedSandboxes)
	}
	if !reflect.DeepEqual(rt.runAttempts, []uint32{6}) {
		t.Errorf("RunPodSandbox attempts %v, want 6", rt.runAttempts)
	}
}
