package eviction

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseThresholds(t *testing.T) {
	ts, err := ParseThresholds(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "pid.available": "0%"},
		map[string]string{"imagefs.available": "20%"}, map[string]string{"imagefs.available": "1m30s"},
		map[string]string{"memory.available": "50Mi"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range ts {
		got = append(got, th.String()+" min "+th.MinReclaim.String())
	}
	want := "memory.available<100Mi (hard) min 50Mi|nodefs.available<10% (hard) min 0%|imagefs.available<20% (soft, grace 1m30s) min 0%"
	if strings.Join(got, "|") != want {
		t.Errorf("thresholds = %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestThresholdsMetAndMinReclaim(t *testing.T) {
	q := resource.MustParse("100")
	th := Threshold{Signal: SignalMemoryAvailable, Value: Value{Quantity: &q}, MinReclaim: Value{Percentage: 0.1}}
	obs := func(avail int64) Observations {
		return Observations{SignalMemoryAvailable: {available: avail, capacity: 1000}}
	}
	if len(thresholdsMet([]Threshold{th}, obs(99), false)) != 1 || len(thresholdsMet([]Threshold{th}, obs(100), false)) != 0 {
		t.Error("available 99 must meet <100, 100 must not")
	}
	// With min reclaim (10% of 1000 = 100) it stays met until available reaches 200.
	if len(thresholdsMet([]Threshold{th}, obs(150), true)) != 1 || len(thresholdsMet([]Threshold{th}, obs(200), true)) != 0 {
		t.Error("min reclaim: 150 must still meet 100+100, 200 must not")
	}
	if len(thresholdsMet([]Threshold{th}, Observations{}, false)) != 0 {
		t.Error("an unobserved signal must meet nothing")
	}
}

func TestRankMemory(t *testing.T) {
	pod := func(name string, req string, prio int32) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
			Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c"}}}}
		if req != "" {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(req)}
		}
		return p
	}
	use := func(b int64) *podUsage { return &podUsage{memory: map[string]int64{"c": b}, disk: map[string]int64{}} }
	guaranteed := pod("guaranteed", "100Mi", 0) // uses less than it requests
	burstyBig := pod("bursty-big", "10Mi", 0)   // 40Mi above its request
	burstySmall := pod("bursty-small", "10Mi", 0)
	bestEffort := pod("besteffort", "", 0)
	important := pod("important-besteffort", "", 1000)
	nostats := pod("nostats", "100Mi", 0)
	stats := map[types.UID]*podUsage{
		"guaranteed": use(50 << 20), "bursty-big": use(50 << 20), "bursty-small": use(20 << 20),
		"besteffort": use(1 << 20), "important-besteffort": use(500 << 20),
	}
	pods := []*v1.Pod{guaranteed, burstySmall, important, bestEffort, burstyBig, nostats}
	rank(pods, v1.ResourceMemory, stats)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	want := "nostats bursty-big bursty-small besteffort important-besteffort guaranteed"
	if strings.Join(got, " ") != want {
		t.Errorf("rank = %v, want %s", got, want)
	}
}

type fakePods struct {
	pods    []*v1.Pod
	evicted map[types.UID]string
}

func (f *fakePods) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range f.pods {
		if _, ok := f.evicted[p.UID]; !ok {
			out = append(out, p)
		}
	}
	return out
}
func (f *fakePods) EvictPod(p *v1.Pod, grace int64, msg string) { f.evicted[p.UID] = msg }
func (f *fakePods) PodCleanedUp(types.UID) bool                 { return true }

type fakeStats struct{ stats []*runtimeapi.ContainerStats }

func (f fakeStats) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest, ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: f.stats}, nil
}

// TestSynchronize drives the manager on fixture files: conditions, one eviction per round, the pressure
// transition period.
func TestSynchronize(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("meminfo", "MemTotal:       1048576 kB\nMemAvailable:    900000 kB\n")
	write("memory.usage_in_bytes", "943718400\n") // 900Mi
	write("memory.stat", "total_inactive_file 104857600\n")
	write("pid_max", "32768\n")
	write("threads-max", "100000\n")
	// Working set 800Mi of 1Gi: 224Mi available, below a 300Mi threshold.
	pods := &fakePods{evicted: map[types.UID]string{}, pods: []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "a"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "b"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}},
	}}
	stat := func(uid string, ws uint64) *runtimeapi.ContainerStats {
		return &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Labels: map[string]string{"io.kubernetes.pod.uid": uid}}, Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}}}
	}
	ts, err := ParseThresholds(map[string]string{"memory.available": "300Mi"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	m, err := New(Config{Thresholds: ts, PressureTransitionPeriod: time.Minute, Pods: pods,
		Runtime: fakeStats{[]*runtimeapi.ContainerStats{stat("a", 10<<20), stat("b", 20<<20)}}, Recorder: rec, NodeName: "n", RootDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m.obs.meminfo, m.obs.memcgRoot, m.obs.pidMax, m.obs.threadsMax = filepath.Join(dir, "meminfo"), dir, filepath.Join(dir, "pid_max"), filepath.Join(dir, "threads-max")
	now := time.Now()
	m.now = func() time.Time { return now }

	got := m.Synchronize(context.Background())
	if got == nil || got.Name != "b" {
		t.Fatalf("evicted %v, want b (the larger user)", got)
	}
	if msg := pods.evicted["b"]; msg != "The node was low on resource: memory. Threshold quantity: 300Mi, available: 224Mi. Container c was using 20Mi, request is 0, has larger consumption of memory. " {
		t.Errorf("message = %q", msg)
	}
	if !m.IsUnderMemoryPressure() || m.IsUnderDiskPressure() || m.IsUnderPIDPressure() {
		t.Error("want MemoryPressure only")
	}
	if got := m.Synchronize(context.Background()); got == nil || got.Name != "a" {
		t.Fatalf("second round evicted %v, want a", got)
	}
	// Relieved: the condition holds for the transition period, then clears.
	write("memory.usage_in_bytes", "104857600\n")
	now = now.Add(30 * time.Second)
	m.Synchronize(context.Background())
	if !m.IsUnderMemoryPressure() {
		t.Error("MemoryPressure cleared before the transition period")
	}
	now = now.Add(31 * time.Second)
	m.Synchronize(context.Background())
	if m.IsUnderMemoryPressure() {
		t.Error("MemoryPressure still True after the transition period")
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, strings.SplitN(<-rec.Events, " ", 3)[1])
	}
	if strings.Join(events, ",") != "EvictionThresholdMet,Evicted,EvictionThresholdMet,Evicted" {
		t.Errorf("events = %v", events)
	}
}
