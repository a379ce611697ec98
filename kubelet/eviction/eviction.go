// Package eviction is the kubelet's eviction manager, after upstream's (pkg/kubelet/eviction): every
// monitoring interval it observes the node's signals — memory.available (capacity minus the root
// cgroup's working set), nodefs.available / nodefs.inodesFree (the kubelet's root dir's filesystem),
// imagefs.available / imagefs.inodesFree (the runtime's image filesystem), pid.available — and compares
// them with the eviction thresholds (evictionHard, evictionSoft with evictionSoftGracePeriod,
// evictionMinimumReclaim).
//
//   - A met threshold (ignoring grace periods) sets its node condition — MemoryPressure, DiskPressure or
//     PIDPressure — which stays True until the threshold has not been met for
//     evictionPressureTransitionPeriod (IsUnderMemoryPressure etc., read by the node status). The node
//     lifecycle controller taints the node from these conditions, as upstream.
//   - Once a threshold is met past its grace period, the manager first reclaims node-level resources for
//     disk signals (unused images), then evicts at most one pod per interval: pods ranked as upstream —
//     those using more than they request first (BestEffort pods request nothing), then lower priority,
//     then the largest use above request. The pod gets phase Failed, reason Evicted and the message
//     "The node was low on resource: memory. Threshold quantity: …, available: …. Container c was using
//     …, request is …, has larger consumption of memory. ", a Warning event Evicted; the node an event
//     EvictionThresholdMet "Attempting to reclaim memory". A hard threshold kills with grace period 0, a
//     soft one with min(terminationGracePeriodSeconds, evictionMaxPodGracePeriod).
//   - A met threshold stays met until available reaches threshold + minimum reclaim; the manager waits
//     (at most 30 s) for an evicted pod's containers to stop before the next round, so one round never
//     evicts more than one pod and the reclaim loop is bounded by the number of pods.
//
// Static and mirror pods and pods of priority system-critical or higher are never evicted.
package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Defaults, as upstream's.
const (
	DefaultMonitoringInterval       = 10 * time.Second
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// Reason is the evicted pod's status.reason and event reason.
	Reason = "Evicted"
	// EventThresholdMet is the node event when pods must be evicted.
	EventThresholdMet = "EvictionThresholdMet"

	podCleanupTimeout  = 30 * time.Second
	podCleanupPoll     = time.Second
	systemCriticalPrio = 2000000000
)

// Pods is what the manager needs of the kubelet.
type Pods interface {
	// ActivePods are the pods whose containers may run (not terminal, not being terminated).
	ActivePods() []*v1.Pod
	// EvictPod kills the pod within gracePeriodSeconds and sets its status to phase Failed, reason
	// Evicted, message.
	EvictPod(pod *v1.Pod, gracePeriodSeconds int64, message string)
	// PodCleanedUp reports whether every container of the pod has stopped.
	PodCleanedUp(uid types.UID) bool
}

// StatsRuntime is the CRI call for per-container usage; runtimeapi.RuntimeServiceClient has it.
type StatsRuntime interface {
	ListContainerStats(ctx context.Context, in *runtimeapi.ListContainerStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error)
}

// Config configures a Manager. Pods, Runtime, Recorder, NodeName and RootDir are required.
type Config struct {
	Thresholds []Threshold
	// PressureTransitionPeriod is how long a pressure condition stays True after its threshold was
	// last met (evictionPressureTransitionPeriod, default 5m).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds bounds the grace period of soft evictions (evictionMaxPodGracePeriod;
	// 0 means the pod's own).
	MaxPodGracePeriodSeconds int64
	Pods                     Pods
	Runtime                  StatsRuntime
	Recorder                 record.EventRecorder
	NodeName                 string
	// RootDir is the kubelet's root dir: its filesystem is nodefs.
	RootDir string
	// PodLogsDir holds the pods' logs, counted in their disk use.
	PodLogsDir string
	// ImageFs reads the image filesystem (nil: no imagefs signals).
	ImageFs ImageFsFunc
	// ReclaimImages removes unused images (node-level reclaim under disk pressure); optional.
	ReclaimImages func(ctx context.Context) (int64, error)
	Logger        *slog.Logger
}

// Manager runs eviction. Create with New; safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	obs observer
	now func() time.Time

	mu             sync.RWMutex
	conditions     map[v1.NodeConditionType]bool
	condLastSeen   map[v1.NodeConditionType]time.Time
	firstObserved  map[Threshold]time.Time
	met            []Threshold // met past their grace period, kept until min-reclaim is satisfied
	lastObsErrText string
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Pods == nil || cfg.Runtime == nil || cfg.Recorder == nil || cfg.NodeName == "" || cfg.RootDir == "" {
		return nil, errors.New("eviction: Pods, Runtime, Recorder, NodeName and RootDir are required")
	}
	if cfg.PressureTransitionPeriod == 0 {
		cfg.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if cfg.PressureTransitionPeriod < 0 || cfg.MaxPodGracePeriodSeconds < 0 {
		return nil, errors.New("eviction: evictionPressureTransitionPeriod and evictionMaxPodGracePeriod must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Manager{
		cfg: cfg, log: cfg.Logger, now: time.Now,
		obs: observer{
			meminfo: "/proc/meminfo", memcgRoot: "/sys/fs/cgroup/memory", pidMax: "/proc/sys/kernel/pid_max",
			threadsMax: "/proc/sys/kernel/threads-max", nodeFsPath: cfg.RootDir, imageFs: cfg.ImageFs, countProcs: sysinfoProcs,
		},
		conditions: map[v1.NodeConditionType]bool{}, condLastSeen: map[v1.NodeConditionType]time.Time{},
		firstObserved: map[Threshold]time.Time{},
	}, nil
}

// IsUnderMemoryPressure reports the MemoryPressure condition.
func (m *Manager) IsUnderMemoryPressure() bool { return m.condition(v1.NodeMemoryPressure) }

// IsUnderDiskPressure reports the DiskPressure condition.
func (m *Manager) IsUnderDiskPressure() bool { return m.condition(v1.NodeDiskPressure) }

// IsUnderPIDPressure reports the PIDPressure condition.
func (m *Manager) IsUnderPIDPressure() bool { return m.condition(v1.NodePIDPressure) }

func (m *Manager) condition(t v1.NodeConditionType) bool {
	if m == nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.conditions[t]
}

// Run synchronizes every interval until ctx ends.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if evicted := m.Synchronize(ctx); evicted != nil {
			m.waitCleanup(ctx, evicted)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Synchronize is one round: observe, update the conditions, and evict at most one pod, which it
// returns (nil when none was evicted).
func (m *Manager) Synchronize(ctx context.Context) *v1.Pod {
	if len(m.cfg.Thresholds) == 0 {
		return nil
	}
	obs, errs := m.obs.observe(ctx)
	m.logObserveErrors(errs)
	now := m.now()

	m.mu.Lock()
	met := thresholdsMet(m.cfg.Thresholds, obs, false)
	for _, t := range thresholdsMet(m.met, obs, true) { // not yet reclaimed down to the minimum
		if !containsThreshold(met, t) {
			met = append(met, t)
		}
	}
	first := map[Threshold]time.Time{}
	for _, t := range met {
		first[t] = now
		if at, ok := m.firstObserved[t]; ok {
			first[t] = at
		}
		m.condLastSeen[signalInfo[t.Signal].condition] = now
	}
	m.firstObserved = first
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		seen, ok := m.condLastSeen[c]
		on := ok && now.Sub(seen) < m.cfg.PressureTransitionPeriod
		if on != m.conditions[c] {
			m.log.Info("node pressure condition", "node", m.cfg.NodeName, "condition", c, "status", on)
		}
		m.conditions[c] = on
	}
	var due []Threshold
	for _, t := range met {
		if now.Sub(first[t]) >= t.GracePeriod {
			due = append(due, t)
		}
	}
	m.met = due
	m.mu.Unlock()

	if len(due) == 0 {
		return nil
	}
	sort.SliceStable(due, func(i, j int) bool { return signalInfo[due[i].Signal].priority < signalInfo[due[j].Signal].priority })
	t := due[0]
	res := signalInfo[t.Signal].resource
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: m.cfg.NodeName, UID: types.UID(m.cfg.NodeName)}
	m.log.Info("eviction threshold met, attempting to reclaim", "node", m.cfg.NodeName, "threshold", t.String(), "resource", res,
		"available", obs[t.Signal].available)
	m.cfg.Recorder.Eventf(nodeRef, v1.EventTypeWarning, EventThresholdMet, "Attempting to reclaim %s", res)
	if m.reclaimNodeLevel(ctx, t) {
		return nil
	}
	pods := m.cfg.Pods.ActivePods()
	if len(pods) == 0 {
		m.log.Error("eviction thresholds met, but no pods are active to evict", "node", m.cfg.NodeName)
		return nil
	}
	stats, err := m.podStats(ctx)
	if err != nil {
		m.log.Warn("eviction: pod stats", "err", err)
	}
	rank(pods, res, stats)
	for _, p := range pods {
		if isCritical(p) {
			continue
		}
		grace := int64(0)
		if !t.hard() {
			grace = v1.DefaultTerminationGracePeriodSeconds
			if p.Spec.TerminationGracePeriodSeconds != nil {
				grace = *p.Spec.TerminationGracePeriodSeconds
			}
			if m.cfg.MaxPodGracePeriodSeconds > 0 {
				grace = min(grace, m.cfg.MaxPodGracePeriodSeconds)
			}
		}
		msg, annotations := message(res, p, stats[p.UID], t, obs[t.Signal])
		m.cfg.Recorder.AnnotatedEventf(p, annotations, v1.EventTypeWarning, Reason, "%s", msg)
		m.log.Info("evicting pod", "pod", p.Namespace+"/"+p.Name, "podUID", p.UID, "node", m.cfg.NodeName,
			"qosClass", p.Status.QOSClass, "gracePeriod", grace, "message", msg)
		m.cfg.Pods.EvictPod(p, grace, msg)
		return p
	}
	m.log.Error("eviction: no pod can be evicted (all critical)", "node", m.cfg.NodeName)
	return nil
}

// reclaimNodeLevel removes unused images for disk signals and reports whether that resolved t.
func (m *Manager) reclaimNodeLevel(ctx context.Context, t Threshold) bool {
	if signalInfo[t.Signal].condition != v1.NodeDiskPressure || m.cfg.ReclaimImages == nil {
		return false
	}
	freed, err := m.cfg.ReclaimImages(ctx)
	if err != nil {
		m.log.Warn("eviction: reclaim images", "err", err)
	}
	if freed == 0 {
		return false
	}
	obs, _ := m.obs.observe(ctx)
	resolved := len(thresholdsMet([]Threshold{t}, obs, true)) == 0
	m.log.Info("eviction: node-level reclaim", "node", m.cfg.NodeName, "signal", t.Signal, "freedBytes", freed, "resolved", resolved)
	return resolved
}

func (m *Manager) waitCleanup(ctx context.Context, p *v1.Pod) {
	deadline := m.now().Add(podCleanupTimeout)
	for !m.cfg.Pods.PodCleanedUp(p.UID) {
		if m.now().After(deadline) {
			m.log.Warn("eviction: timed out waiting for the evicted pod's cleanup", "pod", p.Namespace+"/"+p.Name)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(podCleanupPoll):
		}
	}
}

func (m *Manager) logObserveErrors(errs []error) {
	text := errors.Join(errs...)
	s := ""
	if text != nil {
		s = text.Error()
	}
	m.mu.Lock()
	changed := s != m.lastObsErrText
	m.lastObsErrText = s
	m.mu.Unlock()
	if changed && s != "" {
		m.log.Warn("eviction: some signals cannot be observed", "err", s)
	}
}

// thresholdsMet returns the thresholds whose signal's available amount is below the threshold (plus the
// minimum reclaim when enforceMinReclaim). Unobserved signals meet nothing.
func thresholdsMet(ts []Threshold, obs Observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.of(o.capacity)
		if enforceMinReclaim {
			q += t.MinReclaim.of(o.capacity)
		}
		if o.available < q {
			out = append(out, t)
		}
	}
	return out
}

func containsThreshold(ts []Threshold, t Threshold) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// podUsage is a pod's use per container: memory working set and disk (writable layer and logs) bytes.
type podUsage struct {
	memory, disk map[string]int64
}

func (u *podUsage) total(res v1.ResourceName) int64 {
	var sum int64
	for _, v := range u.of(res) {
		sum += v
	}
	return sum
}

func (u *podUsage) of(res v1.ResourceName) map[string]int64 {
	if res == v1.ResourceMemory {
		return u.memory
	}
	return u.disk
}

// podStats reads the running containers' usage (CRI ListContainerStats) by pod UID, and adds each pod's
// log directory to its disk use.
func (m *Manager) podStats(ctx context.Context) (map[types.UID]*podUsage, error) {
	resp, err := m.cfg.Runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainerStats: %w", err)
	}
	out := map[types.UID]*podUsage{}
	for _, s := range resp.GetStats() {
		uid := types.UID(s.GetAttributes().GetLabels()["io.kubernetes.pod.uid"])
		name := s.GetAttributes().GetMetadata().GetName()
		if uid == "" {
			continue
		}
		u := out[uid]
		if u == nil {
			u = &podUsage{memory: map[string]int64{}, disk: map[string]int64{}}
			out[uid] = u
		}
		u.memory[name] += int64(s.GetMemory().GetWorkingSetBytes().GetValue())
		u.disk[name] += int64(s.GetWritableLayer().GetUsedBytes().GetValue())
	}
	if m.cfg.PodLogsDir != "" {
		dirs, _ := os.ReadDir(m.cfg.PodLogsDir)
		for _, d := range dirs {
			i := strings.LastIndexByte(d.Name(), '_')
			if i < 0 || out[types.UID(d.Name()[i+1:])] == nil {
				continue
			}
			u := out[types.UID(d.Name()[i+1:])]
			_ = filepath.WalkDir(filepath.Join(m.cfg.PodLogsDir, d.Name()), func(p string, e os.DirEntry, err error) error {
				if err == nil && !e.IsDir() {
					if info, ierr := e.Info(); ierr == nil {
						// <dir>/<container>/<n>.log[.…]
						c := filepath.Base(filepath.Dir(p))
						u.disk[c] += info.Size()
					}
				}
				return nil
			})
		}
	}
	return out, nil
}

// rank orders pods for eviction as upstream's rankMemoryPressure / rankDiskPressureFunc /
// rankPIDPressure: pods without stats and pods using more than they request first, then lower
// priority, then the larger use above request. PID pressure ranks by priority only (the CRI gives no
// per-pod process count).
func rank(pods []*v1.Pod, res v1.ResourceName, stats map[types.UID]*podUsage) {
	reqRes := res
	if res != v1.ResourceMemory {
		reqRes = v1.ResourceEphemeralStorage
	}
	over := func(p *v1.Pod) (bool, int64, bool) {
		u, ok := stats[p.UID]
		if !ok {
			return true, 0, false
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[reqRes]
		use := u.total(res)
		return use > req.Value(), use - req.Value(), true
	}
	sort.SliceStable(pods, func(i, j int) bool {
		pi, pj := pods[i], pods[j]
		if res != resourcePIDs {
			oi, di, si := over(pi)
			oj, dj, sj := over(pj)
			if si != sj {
				return !si
			}
			if oi != oj {
				return oi
			}
			if a, b := priority(pi), priority(pj); a != b {
				return a < b
			}
			return di > dj
		}
		return priority(pi) < priority(pj)
	})
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// isCritical: static and mirror pods, and pods of system-critical priority, are never evicted
// (upstream's IsCriticalPod).
func isCritical(p *v1.Pod) bool {
	if src, ok := p.Annotations["kubernetes.io/config.source"]; ok && src != "api" {
		return true
	}
	if _, ok := p.Annotations["kubernetes.io/config.mirror"]; ok {
		return true
	}
	return priority(p) >= systemCriticalPrio
}

// message is upstream's evictionMessage: the starved resource, the threshold and what was available,
// and each container using more than it requests; the annotations name those containers.
func message(res v1.ResourceName, p *v1.Pod, u *podUsage, t Threshold, o observation) (string, map[string]string) {
	format := resource.BinarySI
	if res == resourceInodes || res == resourcePIDs {
		format = resource.DecimalSI
	}
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ", resource.NewQuantity(t.Value.of(o.capacity), format), resource.NewQuantity(o.available, format))
	var names, usages []string
	if u != nil && (res == v1.ResourceMemory || res == v1.ResourceEphemeralStorage) {
		for _, c := range append(append([]v1.Container{}, p.Spec.Containers...), p.Spec.InitContainers...) {
			use, ok := u.of(res)[c.Name]
			if !ok {
				continue
			}
			req := c.Resources.Requests[res]
			usage := resource.NewQuantity(use, resource.BinarySI)
			if usage.Cmp(req) > 0 {
				msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, usage.String(), req.String(), res)
				names, usages = append(names, c.Name), append(usages, usage.String())
			}
		}
	}
	return msg, map[string]string{
		"offending_containers": strings.Join(names, ","), "offending_containers_usage": strings.Join(usages, ","),
		"starved_resource": string(res),
	}
}
