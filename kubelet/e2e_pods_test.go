package kubelet_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kubelet/metrics"
	fwagent "github.com/nodekit/nodekit/test/framework/agent"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// TestPodServesHTTP: a pod bound to the node runs; its status reports phase, IPs, conditions and QoS;
// the demo server answers on the pod IP with the pod's identity; events tell the story; the kubelet's
// metrics recorded the pod's start, its pod worker syncs, PLEG relists and the CRI calls.
func TestPodServesHTTP(t *testing.T) {
	n := newNode(t, true)
	n.metrics = metrics.New(n.name, n.rt.CRI.Runtime())
	n.start()
	n.create(n.demoPod("web"))
	p := n.waitPod("web", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	if p.Status.PodIP == "" || len(p.Status.PodIPs) == 0 {
		t.Fatalf("no pod IP in status: %+v", p.Status)
	}
	if p.Status.HostIP != fwagent.NodeIP {
		t.Errorf("hostIP = %q, want the node's InternalIP %s", p.Status.HostIP, fwagent.NodeIP)
	}
	if p.Status.QOSClass != v1.PodQOSBestEffort || p.Status.StartTime == nil {
		t.Errorf("qosClass=%q startTime=%v", p.Status.QOSClass, p.Status.StartTime)
	}
	for _, c := range []v1.PodConditionType{v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if s := condition(p, c); s != v1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", c, s)
		}
	}
	body := containerd.HTTPGet(t, "http://"+p.Status.PodIP+":8080/")
	want := "pod=web namespace=default ip=" + p.Status.PodIP
	if !strings.Contains(body, want) {
		t.Fatalf("pod answered %q, want it to contain %q", body, want)
	}
	cs := containerStatus(p, "demo")
	if cs.RestartCount != 0 || cs.ContainerID == "" || cs.ImageID == "" || cs.Started == nil || !*cs.Started || !cs.Ready {
		t.Errorf("container status %+v", cs)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := n.events("web")
		if slices.Contains(ev, "Pulled") && slices.Contains(ev, "Created") && slices.Contains(ev, "Started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want Pulled, Created, Started", ev)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := n.metrics
	if c, sum := histogram(t, m.PodStartDuration); c != 1 {
		t.Errorf("kubelet_pod_start_duration_seconds count = %d, want 1 (one pod started)", c)
	} else if sum <= 0 || sum > 60 {
		t.Errorf("kubelet_pod_start_duration_seconds sum = %vs, want within the 60 s the pod took at most", sum)
	}
	if c := histogramCount(t, m.PodWorkerDuration.WithLabelValues("create").(prometheus.Histogram)); c != 1 {
		t.Errorf("kubelet_pod_worker_duration_seconds{operation_type=create} count = %d, want 1", c)
	}
	// The container's start reaches the pod worker again through the PLEG (relist period 1 s).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		c := histogramCount(t, m.PodWorkerDuration.WithLabelValues("sync").(prometheus.Histogram))
		if c >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("kubelet_pod_worker_duration_seconds{operation_type=sync} count = %d, want ≥ 1 (PLEG-driven syncs)", c)
			break
		}
	}
	if c := histogramCount(t, m.PLEGRelistDuration); c < 1 {
		t.Errorf("kubelet_pleg_relist_duration_seconds count = %d, want ≥ 1", c)
	}
	for _, op := range []string{"run_podsandbox", "create_container", "start_container", "list_containers"} {
		if v := testutil.ToFloat64(m.RuntimeOperations.WithLabelValues(op)); v < 1 {
			t.Errorf("kubelet_runtime_operations_total{operation_type=%q} = %v, want ≥ 1", op, v)
		}
	}
}

// histogram reads a histogram's sample count and sum; histogramCount only the count.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var d dto.Metric
	if err := h.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	c, _ := histogram(t, h)
	return c
}

// TestEnvAndVolumes: env values (literal, $(VAR) expansion, downward API, configMap/secret keys,
// envFrom, Service variables) and volume contents (configMap, secret, downwardAPI, emptyDir on disk and
// in memory, hostPath) as seen inside the container; tmpfs volumes are unmounted after deletion.
func TestEnvAndVolumes(t *testing.T) {
	n := newNode(t, true)
	ctx := context.Background()
	core := n.client.CoreV1()
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := core.ConfigMaps(testNS).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"greeting": "hello", "app.conf": "a=1"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = core.Secrets(testNS).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = core.Services(testNS).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.50", Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}, metav1.CreateOptions{})
	mustCreate(err)
	// The API server keeps the "kubernetes" Service in default; make sure one exists.
	master, err := core.Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		master, err = core.Services(metav1.NamespaceDefault).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
			Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}}}}, metav1.CreateOptions{})
	}
	mustCreate(err)
	masterPort := strconv.Itoa(int(master.Spec.Ports[0].Port))
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "file"), []byte("from-host"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.start()

	pod := n.demoPod("envvol")
	// A hostname and a subdomain: the managed /etc/hosts gives the pod's FQDN (DNS conformance specs
	// getent it).
	pod.Spec.Hostname, pod.Spec.Subdomain = "querier", "sub"
	c := &pod.Spec.Containers[0]
	c.Env = append(c.Env,
		v1.EnvVar{Name: "LITERAL", Value: "x"},
		v1.EnvVar{Name: "EXPANDED", Value: "$(LITERAL)-y-$$(LITERAL)"},
		v1.EnvVar{Name: "FROM_CM", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
		v1.EnvVar{Name: "FROM_SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
		v1.EnvVar{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		v1.EnvVar{Name: "APP_LABEL", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
	)
	// Prefixes that are not shell identifiers ("1-", "$_-") are kept, as upstream's relaxed env var names.
	c.EnvFrom = []v1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
		{Prefix: "$_-", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
		{Prefix: "1-", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}}}
	hostPathType := v1.HostPathDirectory
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "cpu_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "demo", Resource: "limits.cpu"}},
		}}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: &hostPathType}}},
		{Name: "sec-group", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}},
	}
	// fsGroup: the volumes' files belong to group 1001 with at least 0440 (0400 becomes 0440), so a
	// non-root container whose supplementary groups hold it reads a secret no other user may read.
	const fsGroup = 1001
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](fsGroup)}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "nonroot", Image: c.Image, ImagePullPolicy: c.ImagePullPolicy,
		Command: []string{"sleep", "3600"}, SecurityContext: &v1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
		VolumeMounts: []v1.VolumeMount{{Name: "sec-group", MountPath: "/etc/sec"}, {Name: "scratch", MountPath: "/scratch"}}})
	c = &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{
		{Name: "cm", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec"}, {Name: "info", MountPath: "/etc/info"},
		{Name: "scratch", MountPath: "/scratch"}, {Name: "mem", MountPath: "/mem"}, {Name: "host", MountPath: "/host", ReadOnly: true},
	}
	n.create(pod)
	p := n.waitPod("envvol", 60*time.Second, "Running", running)
	id := containerStatus(p, "demo").ContainerID

	env := n.exec(id, "env")
	for _, want := range []string{
		"LITERAL=x", "EXPANDED=x-y-$(LITERAL)", "FROM_CM=hello", "FROM_SECRET=s3cret", "NODE=" + n.name, "APP_LABEL=envvol",
		"CM_greeting=hello", "CM_app.conf=a=1", "$_-greeting=hello", "1-password=s3cret", "POD_IP=" + p.Status.PodIP,
		"WEB_SERVICE_HOST=10.96.0.50", "WEB_SERVICE_PORT=80", "WEB_SERVICE_PORT_HTTP=80", "WEB_PORT=tcp://10.96.0.50:80",
		"WEB_PORT_80_TCP_ADDR=10.96.0.50", "KUBERNETES_SERVICE_HOST=" + master.Spec.ClusterIP, "KUBERNETES_SERVICE_PORT=" + masterPort,
	} {
		if !slices.Contains(strings.Split(env, "\n"), want) {
			t.Errorf("env in container lacks %q; env:\n%s", want, env)
		}
	}
	for path, want := range map[string]string{
		"/etc/cfg/greeting": "hello", "/etc/cfg/app.conf": "a=1", "/etc/sec/password": "s3cret",
		"/etc/info/name": "envvol", "/etc/info/labels": `app="envvol"`, "/host/file": "from-host",
	} {
		if got := n.exec(id, "cat", path); got != want {
			t.Errorf("cat %s = %q, want %q", path, got, want)
		}
	}
	if hosts, want := n.exec(id, "cat", "/etc/hosts"), p.Status.PodIP+"\tquerier.sub."+testNS+".svc.cluster.local\tquerier\n"; !strings.Contains(hosts, want) {
		t.Errorf("/etc/hosts lacks the pod's own entry %q:\n%s", want, hosts)
	}
	nonroot := containerStatus(p, "nonroot").ContainerID
	if got := n.exec(nonroot, "cat", "/etc/sec/password"); got != "s3cret" {
		t.Errorf("non-root container with fsGroup reads %q from a 0400 secret, want s3cret", got)
	}
	n.exec(nonroot, "touch", "/scratch/by-nonroot")
	n.exec(id, "touch", "/scratch/a")
	n.exec(id, "touch", "/mem/b")
	if _, _, code := n.rt.Exec(t, criID(id), "touch", "/host/denied"); code == 0 {
		t.Errorf("touch on a readOnly hostPath mount succeeded")
	}
	volDir := filepath.Join(n.rootDir, "pods", string(p.UID), "volumes")
	if _, err := os.Stat(filepath.Join(volDir, "kubernetes.io~empty-dir", "scratch", "a")); err != nil {
		t.Errorf("file written to emptyDir is not on the node's disk: %v", err)
	}
	memDir := filepath.Join(volDir, "kubernetes.io~empty-dir", "mem")
	if m, _ := mountinfo.Mounted(memDir); !m {
		t.Errorf("medium Memory emptyDir %s is not a mount", memDir)
	}
	for _, d := range []string{memDir, filepath.Join(volDir, "kubernetes.io~empty-dir", "scratch")} {
		if fi, err := os.Stat(d); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o777 {
			t.Errorf("emptyDir %s: mode %v, want rwxrwxrwx as upstream's", d, fi.Mode())
		}
	}
	secFile := filepath.Join(volDir, "kubernetes.io~secret", "sec-group", "password")
	for path, want := range map[string]os.FileMode{secFile: 0o440, filepath.Join(volDir, "kubernetes.io~empty-dir", "scratch"): 0o777 | os.ModeSetgid | os.ModeDir,
		filepath.Join(volDir, "kubernetes.io~empty-dir", "scratch", "by-nonroot"): 0} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != fsGroup || (want != 0 && fi.Mode() != want) {
			t.Errorf("%s: group %d mode %v, want group %d (fsGroup) mode %v", path, gid, fi.Mode(), fsGroup, want)
		}
	}
	// No cpu limit: the downward API reports the node's allocatable cpu (whole cores, rounded up), as upstream.
	if got := n.exec(id, "cat", "/etc/info/cpu_limit"); got == "" || got == "0" {
		t.Errorf("downwardAPI limits.cpu without a limit = %q, want the node's allocatable cpu", got)
	}
	if target, _ := os.Readlink(filepath.Join(volDir, "kubernetes.io~configmap", "cm", "greeting")); target != "..data/greeting" {
		t.Errorf("configMap file is not the atomic-writer symlink into ..data: %q", target)
	}

	n.deleteGracefully("envvol", 2)
	n.waitGone("envvol", 30*time.Second)
	deadline := time.Now().Add(15 * time.Second)
	for {
		mounts, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(n.rootDir))
		_, statErr := os.Stat(filepath.Join(n.rootDir, "pods", string(p.UID)))
		if len(mounts) == 0 && os.IsNotExist(statErr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deletion: %d mounts under %s, pod dir stat: %v", len(mounts), n.rootDir, statErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cgroupFile reads a cgroup v1 file of a container below the pod's cgroup parent (id "": of the pod
// cgroup itself).
func cgroupFile(t *testing.T, controller, parent, id, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, parent, criID(id), file))
	if err != nil {
		t.Fatalf("read cgroup file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// TestResourcesAndSecurityContext: requests/limits become the container's cgroup settings below the
// Burstable QoS parent; runAsUser/runAsGroup, capabilities and readOnlyRootFilesystem take effect.
func TestResourcesAndSecurityContext(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		t.Skip("needs cgroup v1 (no /sys/fs/cgroup/memory)")
	}
	n := newNode(t, false)
	pod := n.demoPod("limits")
	c := &pod.Spec.Containers[0]
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	uid, gid, ro := int64(1000), int64(3000), true
	c.SecurityContext = &v1.SecurityContext{
		RunAsUser: &uid, RunAsGroup: &gid, ReadOnlyRootFilesystem: &ro,
		Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_ADMIN"}},
	}
	p, id, parent := n.runInQOS(pod, v1.PodQOSBurstable)
	// The kubelet sized the pod cgroup itself (every container has limits: they apply to the pod).
	for file, want := range map[string]string{"memory/memory.limit_in_bytes": "67108864", "cpu/cpu.cfs_quota_us": "50000",
		"cpu/cpu.cfs_period_us": "100000", "cpu/cpu.shares": "256"} {
		if got := cgroupFile(t, filepath.Dir(file), parent, "", filepath.Base(file)); got != want {
			t.Errorf("pod cgroup %s = %s, want %s", file, got, want)
		}
	}
	if s, ok := n.kl.PodCgroupStats(p.UID); !ok || s.CPUUsageNanos == 0 || s.MemoryUsage == 0 || s.MemoryWorkingSet > s.MemoryUsage {
		t.Errorf("PodCgroupStats = %+v, %v; want CPU time and memory use of the running pod", s, ok)
	}
	if got := cgroupFile(t, "memory", parent, id, "memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("memory.limit_in_bytes = %s, want 67108864 (64Mi)", got)
	}
	if got := cgroupFile(t, "cpu", parent, id, "cpu.cfs_quota_us"); got != "50000" {
		t.Errorf("cpu.cfs_quota_us = %s, want 50000 (500m of a 100000us period)", got)
	}
	if got := cgroupFile(t, "cpu", parent, id, "cpu.cfs_period_us"); got != "100000" {
		t.Errorf("cpu.cfs_period_us = %s, want 100000", got)
	}
	if got := cgroupFile(t, "cpu", parent, id, "cpu.shares"); got != "256" {
		t.Errorf("cpu.shares = %s, want 256 (250m)", got)
	}
	st := n.exec(id, "cat", "/proc/1/status")
	for _, want := range []string{"Uid:\t1000\t1000\t1000\t1000", "Gid:\t3000\t3000\t3000\t3000", "CapBnd:\t0000000000001000"} {
		if !strings.Contains(st, want) {
			t.Errorf("/proc/1/status lacks %q:\n%s", want, st)
		}
	}
	if _, _, code := n.rt.Exec(t, criID(id), "touch", "/rootfs-write"); code == 0 {
		t.Errorf("write to a readOnlyRootFilesystem succeeded")
	}
}

// TestHostNetworkPod: a hostNetwork pod runs in the node's network (and UTS) namespace: it starts (the
// sandbox asks for no hostname of its own, which the runtime would refuse without a private UTS
// namespace), its pod IP is the node's InternalIP, it serves on the node's own ports (this harness's
// node is the host's network namespace) and sees the node's hostname.
func TestHostNetworkPod(t *testing.T) {
	n := newNode(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	pod := n.demoPod("hostnet", "--port="+strconv.Itoa(port), "--grpc-port=0", "--udp-port=0")
	pod.Spec.HostNetwork = true
	n.create(pod)
	p := n.waitPod("hostnet", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	if p.Status.PodIP != fwagent.NodeIP || p.Status.HostIP != fwagent.NodeIP {
		t.Fatalf("podIP %q hostIP %q, want both the node's InternalIP %s", p.Status.PodIP, p.Status.HostIP, fwagent.NodeIP)
	}
	body := containerd.HTTPGet(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	host, _ := os.Hostname()
	if want := "pod=hostnet namespace=default ip=" + fwagent.NodeIP; !strings.Contains(body, want) || !strings.Contains(body, host) {
		t.Fatalf("pod answered %q, want it to contain %q and the node's hostname %q", body, want, host)
	}
}
