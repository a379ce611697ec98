package kubelet_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crilogs "k8s.io/cri-client/pkg/logs"

	"github.com/nodekit/nodekit/images/build"
	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/images/registry"
	"github.com/nodekit/nodekit/kubelet"
	runtimecontainerd "github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// TestLongRunningNode runs a node with tiny limits on real containerd: a container's log is rotated
// past containerLogMaxSize and `logs` (followed across the rotations, and afresh) still works; image GC
// at a 1 % high threshold removes an unused pulled image and keeps the used and the pinned ones; eviction
// thresholds every figure of the node is below (memory.available above the node's memory capacity,
// nodefs.available 99.9 %, pid.available above pid_max) make MemoryPressure, DiskPressure and
// PIDPressure True and evict the BestEffort pod before the Guaranteed one, with reason Evicted. Nothing is
// consumed: the thresholds are set from the node's own figures.
func TestLongRunningNode(t *testing.T) {
	n := newNode(t, true)
	kc := &n.cfg.Kubelet
	kc.ContainerLogMaxSize = "2Ki"
	three := int32(3)
	kc.ContainerLogMaxFiles = &three
	n.cfg.TuneKubelet = func(k *kubelet.Config) {
		tuneKubelet(k)
		k.ContainerLogMonitorInterval, k.ImageGCPeriod, k.EvictionMonitoringInterval = 500*time.Millisecond, time.Second, time.Second
	}
	n.start()

	logsPod := n.create(n.demoPod("logs-" + randSuffix()))
	logsPod = n.waitPod(logsPod.Name, 2*time.Minute, "running", running)

	t.Run("log rotation", func(t *testing.T) { testLogRotation(t, n, logsPod) })
	t.Run("image GC", func(t *testing.T) { testImageGC(t, n) })
	t.Run("eviction", func(t *testing.T) { testEviction(t, n) })
}

func testLogRotation(t *testing.T, n *node, pod *v1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The kubelet server's /containerLogs and crictl logs both read through runtime/cri.ReadLogs on
	// the path CRI ContainerStatus gives; a follower started before any rotation must keep up across them.
	id := criID(containerStatus(pod, "demo").ContainerID)
	st, err := n.rt.CRI.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	logPath := st.GetStatus().GetLogPath()
	readLogs := func(ctx context.Context, follow bool, w io.Writer) error {
		return cri.ReadLogs(ctx, logPath, id, &crilogs.LogOptions{Follow: follow}, n.rt.CRI.Runtime(), w, w)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(readLogs(ctx, true, pw)) }()
	defer pr.Close()
	followed := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			followed <- sc.Text()
		}
		close(followed)
	}()
	dir := filepath.Join(n.logDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), "demo")
	post := func(ok string, count int) {
		for range count {
			resp, err := http.Post("http://"+pod.Status.PodIP+":8080/control/readyz?ok="+ok, "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	if _, err := containerd.WaitHTTP("http://"+pod.Status.PodIP+":8080/healthz", time.Minute); err != nil {
		t.Fatal(err)
	}
	rotated := func() []string {
		files, _ := filepath.Glob(filepath.Join(dir, "0.log.*"))
		return files
	}
	// Each round writes ~3 KiB (> containerLogMaxSize 2Ki) and waits for a rotation; 4 rotations with
	// containerLogMaxFiles 3 leave the live file, one uncompressed and one compressed rotated file.
	var seen []string
	for round := range 4 {
		post("true", 40)
		deadline := time.Now().Add(30 * time.Second)
		for {
			files := rotated()
			var fresh bool
			for _, f := range files {
				if !slices.Contains(seen, strings.TrimSuffix(f, ".gz")) {
					fresh = true
					seen = append(seen, strings.TrimSuffix(f, ".gz"))
				}
			}
			if fresh {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no new rotated log in %s after 30s; have %v", round, dir, files)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second) // the rotated name has a one-second stamp
	}
	files := rotated()
	var gz, plain []string
	for _, f := range files {
		if strings.HasSuffix(f, ".gz") {
			gz = append(gz, f)
		} else {
			plain = append(plain, f)
		}
	}
	if len(files) != 2 || len(gz) != 1 || len(plain) != 1 {
		t.Fatalf("after 4 rotations with containerLogMaxFiles=3: rotated files %v, want one .gz and one plain", files)
	}
	f, err := os.Open(gz[0])
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", gz[0], err)
	}
	b, err := io.ReadAll(zr)
	f.Close()
	if err != nil || !strings.Contains(string(b), "stdout F ") || !strings.Contains(string(b), "control: readyz ok=true") {
		t.Fatalf("%s holds %d bytes (err %v), want CRI log lines of the container", gz[0], len(b), err)
	}

	// A marker after the rotations: the follower gets it, and a fresh `logs` shows the live file.
	post("false", 1)
	marker := "control: readyz ok=false"
	timeout := time.After(20 * time.Second)
	lines := 0
	for found := false; !found; {
		select {
		case l, ok := <-followed:
			if !ok {
				t.Fatalf("the followed log stream ended after %d lines", lines)
			}
			lines++
			found = strings.Contains(l, marker)
		case <-timeout:
			t.Fatalf("the log follower did not get %q after the rotations (%d lines read)", marker, lines)
		}
	}
	if lines < 4*40 {
		t.Errorf("the follower read %d lines across the rotations, want all %d", lines, 4*40+1)
	}
	var out strings.Builder
	if err := readLogs(ctx, false, &out); err != nil || !strings.Contains(out.String(), marker) {
		t.Fatalf("logs after rotation = %q, %v; want the marker", out.String(), err)
	}
	cur, _ := os.Stat(logPath)
	if cur == nil || int64(out.Len()) > cur.Size() {
		t.Errorf("logs returned %d bytes, more than the live file (%v): it should show only the live file", out.Len(), cur)
	}
	t.Logf("rotated files %v; follower read %d lines", files, lines)
}

func testImageGC(t *testing.T, n *node) {
	ctx := context.Background()
	// An image pulled from a loopback registry is unused and unpinned; the bundled images are pinned, as
	// a managed agent pins what its containerd imported (the framework imported them here).
	victim := pullUnpinnedImage(t, n)
	// Restarted with image GC on (the harness has it off): the pod's image is in use by then.
	kc := &n.cfg.Kubelet
	one, zero := int32(1), int32(0)
	oldHigh, oldLow, oldTune := kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent, n.cfg.TuneKubelet
	n.stop()
	kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent, kc.ImageMinimumGCAge = &one, &zero, metav1.Duration{}
	n.cfg.TuneKubelet = func(k *kubelet.Config) {
		oldTune(k)
		k.PinnedImages = append(k.PinnedImages, bundled.All...)
	}
	n.start()
	defer func() {
		n.stop()
		kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent, n.cfg.TuneKubelet = oldHigh, oldLow, oldTune
		n.start()
	}()
	has := func(ref string) bool {
		resp, err := n.rt.CRI.Image().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetImage() != nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for has(victim) {
		if time.Now().After(deadline) {
			t.Fatalf("unused image %s still present 30s into image GC at imageGCHighThresholdPercent=1", victim)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, ref := range bundled.All {
		if !has(ref) {
			t.Errorf("image GC removed %s: in use or pinned (a bundled image)", ref)
		}
	}
	// The used and pinned images cannot bring the disk to 0 %: FreeDiskSpaceFailed on the node, as upstream.
	waitNodeEvent(t, n, "FreeDiskSpaceFailed", "Failed to garbage collect required amount of images")
}

// pullUnpinnedImage builds a one-file image of its own (no bundled image shares its ID), serves it from a
// loopback registry and pulls it through CRI: a pulled image is not pinned. It returns the pulled ref.
func pullUnpinnedImage(t *testing.T, n *node) string {
	ctx := context.Background()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	body := []byte("image GC victim " + randSuffix() + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "gc-victim", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := build.FromLayer(layer.Bytes(), build.ImageConfig{Arch: goruntime.GOARCH, Cmd: []string{"/gc-victim"}, CreatedBy: "testImageGC"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const ref = bundled.Registry + "/gc-victim:v1"
	if _, err := build.WriteArchive(img, ref, filepath.Join(dir, "gc-victim.tar"), filepath.Join(dir, "layout")); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Start(ctx, "127.0.0.1:0", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if err := runtimecontainerd.WriteRegistryHost(n.rt.Supervisor.RegistryConfigPath(), reg.Addr); err != nil {
		t.Fatal(err)
	}
	pulled := reg.Ref(ref)
	if _, err := n.rt.CRI.Image().PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: pulled}}); err != nil {
		t.Fatalf("PullImage %s: %v", pulled, err)
	}
	st, err := n.rt.CRI.Image().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: pulled}})
	if err != nil || st.GetImage() == nil || st.GetImage().GetPinned() {
		t.Fatalf("pulled %s: status %v, %v; want present and not pinned", pulled, st.GetImage(), err)
	}
	return pulled
}

func testEviction(t *testing.T, n *node) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := n.demoPod("besteffort-" + randSuffix())
	gu := n.demoPod("guaranteed-" + randSuffix())
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}
	gu.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	n.create(gu)
	n.create(be)
	n.waitPod(gu.Name, 2*time.Minute, "running", running)
	n.waitPod(be.Name, 2*time.Minute, "running", running)

	// Thresholds above what the node has, from its own figures: nothing is consumed.
	memTotal := readMeminfo(t, "MemTotal") * 1024
	pidMax, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pm, _ := strconv.ParseInt(strings.TrimSpace(string(pidMax)), 10, 64)
	memThreshold := resource.NewQuantity(memTotal+(1<<30), resource.BinarySI).String()
	n.stop()
	n.cfg.Kubelet.EvictionHard = map[string]string{
		"memory.available": memThreshold,
		"nodefs.available": "99.9%",
		"pid.available":    strconv.FormatInt(pm+1000, 10),
	}
	w, err := n.client.CoreV1().Pods(testNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	n.start()

	var failed []string // pod names in the order they became Failed
	for len(failed) < 2 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("pod watch ended; failed so far %v", failed)
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok || (p.Name != be.Name && p.Name != gu.Name) || p.Status.Phase != v1.PodFailed || slices.Contains(failed, p.Name) {
				continue
			}
			if p.Status.Reason != "Evicted" || !strings.HasPrefix(p.Status.Message, "The node was low on resource: memory. Threshold quantity: "+memThreshold+", available: ") {
				t.Fatalf("pod %s Failed with reason %q message %q; want Evicted, low on memory", p.Name, p.Status.Reason, p.Status.Message)
			}
			if p.Name == be.Name && !strings.Contains(p.Status.Message, "Container demo was using ") {
				t.Errorf("the BestEffort pod's message %q does not name the container over its request", p.Status.Message)
			}
			failed = append(failed, p.Name)
			t.Logf("pod %s evicted: %s", p.Name, p.Status.Message)
		case <-ctx.Done():
			t.Fatalf("pods not evicted within 2m; Failed so far: %v", failed)
		}
	}
	if failed[0] != be.Name {
		t.Fatalf("eviction order %v, want the BestEffort pod %s first", failed, be.Name)
	}
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[v1.NodeConditionType]string{
		v1.NodeMemoryPressure: "KubeletHasInsufficientMemory", v1.NodeDiskPressure: "KubeletHasDiskPressure",
		v1.NodePIDPressure: "KubeletHasInsufficientPID",
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var wrong []string
		for _, c := range node.Status.Conditions {
			if r, ok := want[c.Type]; ok && (c.Status != v1.ConditionTrue || c.Reason != r) {
				wrong = append(wrong, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
			}
		}
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node conditions %v, want MemoryPressure, DiskPressure and PIDPressure True", wrong)
		}
		time.Sleep(500 * time.Millisecond)
		if node, err = n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if evs := n.events(be.Name); !slices.Contains(evs, "Evicted") {
		t.Errorf("events of %s = %v, want Evicted", be.Name, evs)
	}
	waitNodeEvent(t, n, "EvictionThresholdMet", "Attempting to reclaim memory")
}

// waitNodeEvent waits up to 30s for an event of the node with reason whose message contains msg.
func waitNodeEvent(t *testing.T, n *node, reason, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := n.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err == nil {
			for _, e := range list.Items {
				if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == n.name && e.Reason == reason && strings.Contains(e.Message, msg) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node event %s %q within 30s (err %v)", reason, msg, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func readMeminfo(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key+":" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	t.Fatalf("/proc/meminfo has no %s", key)
	return 0
}
