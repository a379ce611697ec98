// Package kuberuntime is the kubelet's runtime manager over CRI v1: it turns a pod spec into sandbox and
// container configs, decides what must change (computePodActions), and carries it out with CRI calls —
// image pulls with back-off, init containers in order, restartable init (sidecar) containers, app
// containers, lifecycle hooks, restart back-off (CrashLoopBackOff), graceful termination, and garbage
// collection of dead containers and sandboxes. It reads pods' runtime state back as PodStatus.
package kuberuntime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"

	"github.com/nodekit/nodekit/kubelet/cgroups"
)

// RunContainerOptions are the parts of a container config the kubelet computes from API objects.
type RunContainerOptions struct {
	Envs   []*runtimeapi.KeyValue
	Mounts []*runtimeapi.Mount
}

// RuntimeHelper is what the runtime manager needs from the kubelet (upstream's RuntimeHelper).
type RuntimeHelper interface {
	// GenerateRunContainerOptions resolves env (values, downward API, configMap/secret refs, envFrom,
	// service env vars) and mounts (volumes, /etc/hosts) for container c of pod; podIPs are the sandbox's.
	GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) (*RunContainerOptions, error)
	// GetPodDNS returns the sandbox DNS config for the pod's dnsPolicy and dnsConfig.
	GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error)
	// GetPullSecrets returns the pod's imagePullSecrets that exist.
	GetPullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret
}

// Options configure a Manager.
type Options struct {
	Runtime  runtimeapi.RuntimeServiceClient
	Images   runtimeapi.ImageServiceClient
	Recorder record.EventRecorder
	Helper   RuntimeHelper
	// PodLogsDir is the root of pod log directories (/var/log/pods).
	PodLogsDir string
	// PodContainerDir is the host directory of a container's per-instance files, upstream's
	// <pod dir>/containers/<container>: each instance's termination message file is created there and
	// bind-mounted at its terminationMessagePath. Nil: no termination message files.
	PodContainerDir func(uid types.UID, container string) string
	// CgroupRoot and CgroupDriver ("cgroupfs" or "systemd") place the pod and QoS cgroups (see
	// CgroupParent and package cgroups), which the manager creates, sizes and removes. An empty
	// CgroupDriver leaves cgroups alone (runc creates the parents unsized).
	CgroupRoot, CgroupDriver string
	// CgroupMount is where the cgroup hierarchy is mounted; default cgroups.DefaultMount.
	CgroupMount string
	// Back-off bounds for container restarts and image pulls.
	CrashLoopBackOff, MaxCrashLoopBackOff time.Duration
	ImagePullBackOff, MaxImagePullBackOff time.Duration
	SerializeImagePulls                   bool
	// MaxPerPodContainer dead instances of each container are kept by garbage collection.
	MaxPerPodContainer int
	// RuntimeHandler returns the CRI runtime handler of the pod's spec.runtimeClassName (its RuntimeClass's
	// handler; "" for the runtime's default when the pod names none), or an error when the class does
	// not exist. nil means every pod runs under the default handler.
	RuntimeHandler func(pod *v1.Pod) (string, error)
	Log            *slog.Logger
}

// Manager is the runtime manager. It is safe for concurrent use by the pod workers (one call per pod at
// a time).
type Manager struct {
	opts        Options
	runtimeName string
	backOff     *flowcontrol.Backoff
	puller      *imagePuller
	log         *slog.Logger
	memCapacity int64
	cg          *cgroups.Manager // nil: cgroups not managed

	mu      sync.Mutex
	waiting map[string]Waiting // by podUID/containerName

	// creating is read-locked around every RunPodSandbox; NetworkGC runs only when it can take it.
	creating sync.RWMutex
}

// NetworkGC calls gc with the ID of every sandbox the runtime lists (any state), while no RunPodSandbox
// of this manager is in flight and none starts, so a sandbox whose network is set up but that the runtime
// does not list yet is never missing from the list. ran is false (and gc not called) when a sandbox is
// being created; the caller tries again later.
func (m *Manager) NetworkGC(ctx context.Context, gc func(ctx context.Context, sandboxIDs []string) error) (ran bool, err error) {
	if !m.creating.TryLock() {
		return false, nil
	}
	defer m.creating.Unlock()
	resp, err := m.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return true, fmt.Errorf("ListPodSandbox: %w", err)
	}
	ids := make([]string, 0, len(resp.Items))
	for _, sb := range resp.Items {
		ids = append(ids, sb.Id)
	}
	return true, gc(ctx, ids)
}

// New returns a Manager; it asks the runtime for its name (for "<runtime>://<id>" container IDs).
func New(ctx context.Context, o Options) (*Manager, error) {
	v, err := o.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI Version: %w", err)
	}
	m := &Manager{
		opts:        o,
		runtimeName: v.RuntimeName,
		backOff:     flowcontrol.NewBackOff(o.CrashLoopBackOff, o.MaxCrashLoopBackOff),
		log:         o.Log,
		waiting:     map[string]Waiting{},
		memCapacity: memTotal(),
	}
	if o.CgroupDriver != "" {
		mount := o.CgroupMount
		if mount == "" {
			mount = cgroups.DefaultMount
		}
		if m.cg, err = cgroups.New(mount, o.CgroupDriver); err != nil {
			return nil, err
		}
	}
	m.puller = newImagePuller(o.Images, o.Recorder, o.ImagePullBackOff, o.MaxImagePullBackOff, o.SerializeImagePulls)
	return m, nil
}

// RuntimeName is the runtime's name as reported by CRI Version (e.g. "containerd").
func (m *Manager) RuntimeName() string { return m.runtimeName }

// WaitingReason returns why the named container of the pod is waiting, as recorded by the last sync
// that tried to start it; ok is false when its last start attempt succeeded.
func (m *Manager) WaitingReason(uid types.UID, container string) (Waiting, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.waiting[string(uid)+"/"+container]
	return w, ok
}

func (m *Manager) setWaiting(uid types.UID, container string, w *Waiting) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := string(uid) + "/" + container
	if w == nil {
		delete(m.waiting, k)
	} else {
		m.waiting[k] = *w
	}
}

// ForgetPod drops what the manager remembers about a pod (waiting reasons, back-off entries).
func (m *Manager) ForgetPod(pod *v1.Pod) {
	m.mu.Lock()
	for k := range m.waiting {
		if len(k) > len(pod.UID) && k[:len(pod.UID)+1] == string(pod.UID)+"/" {
			delete(m.waiting, k)
		}
	}
	m.mu.Unlock()
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		m.backOff.DeleteEntry(backOffKey(pod, &c))
	}
	m.puller.gc()
	m.backOff.GC()
}

// GetPodStatus reads the pod's sandboxes and containers from the runtime (by the pod UID label).
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*PodStatus, error) {
	sel := map[string]string{kubelettypes.KubernetesPodUIDLabel: string(uid)}
	sbs, err := m.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	st := &PodStatus{ID: uid, Name: name, Namespace: namespace}
	items := sbs.Items
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt > items[j].CreatedAt })
	for i, sb := range items {
		s, err := m.opts.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("PodSandboxStatus %s: %w", sb.Id, err)
		}
		st.SandboxStatuses = append(st.SandboxStatuses, s.Status)
		if i == 0 && s.Status.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			st.IPs = sandboxIPs(s.Status)
		}
	}
	ctrs, err := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	for _, c := range ctrs.Containers {
		s, err := m.opts.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("ContainerStatus %s: %w", c.Id, err)
		}
		cs := m.toContainerStatus(s.Status)
		cs.SandboxID = c.PodSandboxId
		if s.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if msg := m.terminationMessage(ctx, s.Status); msg != "" {
				if cs.Message != "" {
					cs.Message += ": "
				}
				cs.Message += msg
			}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	sort.SliceStable(st.ContainerStatuses, func(i, j int) bool {
		return st.ContainerStatuses[i].CreatedAt.After(st.ContainerStatuses[j].CreatedAt)
	})
	return st, nil
}

func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	n := s.GetNetwork()
	if n == nil || n.Ip == "" {
		return nil
	}
	ips := []string{n.Ip}
	for _, ip := range n.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips
}

func (m *Manager) toContainerStatus(s *runtimeapi.ContainerStatus) *ContainerStatus {
	restarts, _ := strconv.Atoi(s.Annotations[annotationRestartCount])
	cs := &ContainerStatus{
		ID:           s.Id,
		Runtime:      m.runtimeName,
		Name:         s.GetMetadata().GetName(),
		State:        s.State,
		ExitCode:     s.ExitCode,
		Image:        s.GetImage().GetImage(),
		ImageRef:     s.ImageRef,
		Hash:         s.Annotations[annotationContainerHash],
		RestartCount: restarts,
		Reason:       s.Reason,
		Message:      s.Message,
	}
	if n := s.GetImage().GetUserSpecifiedImage(); n != "" {
		cs.Image = n
	}
	if s.CreatedAt > 0 {
		cs.CreatedAt = time.Unix(0, s.CreatedAt)
	}
	if s.StartedAt > 0 {
		cs.StartedAt = time.Unix(0, s.StartedAt)
	}
	if s.FinishedAt > 0 {
		cs.FinishedAt = time.Unix(0, s.FinishedAt)
	}
	return cs
}

// GetPods lists the pods the runtime has (any sandbox or container labelled with a pod UID).
func (m *Manager) GetPods(ctx context.Context) ([]*RunningPod, error) {
	sbs, err := m.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	ctrs, err := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	pods := map[types.UID]*RunningPod{}
	get := func(labels map[string]string) *RunningPod {
		uid := types.UID(kubelettypes.GetPodUID(labels))
		if uid == "" {
			return nil
		}
		p, ok := pods[uid]
		if !ok {
			p = &RunningPod{UID: uid, Name: kubelettypes.GetPodName(labels), Namespace: kubelettypes.GetPodNamespace(labels)}
			pods[uid] = p
		}
		return p
	}
	for _, sb := range sbs.Items {
		if p := get(sb.Labels); p != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			p.Running = true
		}
	}
	for _, c := range ctrs.Containers {
		p := get(c.Labels)
		if p == nil {
			continue
		}
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			p.Running = true
		}
		if g, err := strconv.ParseInt(c.Annotations[annotationTerminationGrace], 10, 64); err == nil && p.GracePeriod == nil {
			p.GracePeriod = &g
		}
	}
	out := make([]*RunningPod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	return out, nil
}

// memTotal is the node's memory in bytes from /proc/meminfo (0 when unreadable).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// isNotFound reports a CRI NotFound answer (the sandbox or container is already gone).
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
