// Package kubelet is the pod lifecycle half of nodekit's node agent: it watches the pods bound to its node
// (fieldSelector spec.nodeName=<node>), runs one pod worker per pod that converges the runtime (CRI) to
// the pod spec, reacts to container state changes reported by the PLEG, and writes the observed status
// back through the pods/status subresource. The concepts and their packages:
//
//   - pod workers (kubelet/podworkers): one goroutine per pod, updates serialized per pod;
//   - runtime manager (kubelet/kuberuntime): computePodActions and the CRI calls that carry them out;
//   - PLEG (kubelet/pleg): relist of CRI sandboxes/containers plus CRI container events;
//   - status manager (kubelet/status): API status generation and writes, reconciliation with the API's
//     copy, final deletion;
//   - volumes (kubelet/volumes): emptyDir, hostPath, configMap, secret, downwardAPI, projected;
//   - the probe hook (ProbeManager in this package; kubelet/prober implements it, kubelet/prober/results
//     holds the probe types and results).
//
// A pod's path: informer event → podUpdated → pod worker → syncPod (volumes, kuberuntime.SyncPod,
// status) → PLEG event on every container change → syncPod again → … → deletion: syncTerminatingPod
// (preStop, StopContainer with the grace period, StopPodSandbox) → syncTerminatedPod (volumes, final
// status, API delete with grace 0) → syncRemovedPod (containers, sandboxes, logs, pod dir).
//
// The node half (registration, leases, node status, the :10250 server, static pod files) builds on New,
// Run, Pods, GetPodByName and SetStaticPods.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/kubelet/cgroups"
	"github.com/nodekit/nodekit/kubelet/eviction"
	"github.com/nodekit/nodekit/kubelet/kuberuntime"
	"github.com/nodekit/nodekit/kubelet/objectcache"
	"github.com/nodekit/nodekit/kubelet/pleg"
	"github.com/nodekit/nodekit/kubelet/podworkers"
	"github.com/nodekit/nodekit/kubelet/prober/results"
	"github.com/nodekit/nodekit/kubelet/status"
	"github.com/nodekit/nodekit/kubelet/sysctl"
	"github.com/nodekit/nodekit/kubelet/volumes"
)

// Kubelet runs the pods bound to one node. Create it with New and start it with Run; the accessors are
// safe for concurrent use while it runs.
type Kubelet struct {
	cfg      Config
	log      *slog.Logger
	recorder record.EventRecorder
	prober   ProbeManager
	volumes  *volumes.Manager
	objects  *objectcache.Manager // the pods' ConfigMaps and Secrets, watched
	status   *status.Manager

	// Set by Run.
	runtime  *kuberuntime.Manager
	pleg     *pleg.PLEG
	workers  *podworkers.Workers
	services corelisters.ServiceLister
	apiPods  corelisters.PodLister // the node's pods as the API has them (mirror pods included)
	running  chan struct{}
	// runtimeReady is runtime once Run has set it, for readers outside the pod workers (the server).
	runtimeReady atomic.Pointer[kuberuntime.Manager]

	mu        sync.RWMutex
	pods      map[types.UID]*v1.Pod // desired pods: API pods bound to the node and static pods
	static    map[types.UID]bool
	unhealthy map[string]kuberuntime.FailedProbe // container ID → the probe it failed
	volPaths  map[types.UID]map[string]string
	probed    map[types.UID]bool // pods handed to the ProbeManager
	starts    podStarts
	started   bool
	node      *v1.Node
	nodeAt    time.Time
	failed    map[types.UID]podFailure // pods the kubelet failed: evicted or rejected (longrun.go)
	admitted  map[types.UID]bool       // pods whose host ports were admitted (hostports.go)
	sysctls   *sysctl.Allowlist

	eviction atomic.Pointer[eviction.Manager] // set by Run when there are eviction thresholds
}

// New validates cfg (errors name the missing or bad field) and returns a Kubelet that does nothing until
// Run is called.
func New(cfg Config) (*Kubelet, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		cfg:       c,
		log:       c.Logger.With("node", c.NodeName),
		recorder:  c.Recorder,
		prober:    c.ProbeManager,
		pods:      map[types.UID]*v1.Pod{},
		static:    map[types.UID]bool{},
		unhealthy: map[string]kuberuntime.FailedProbe{},
		volPaths:  map[types.UID]map[string]string{},
		probed:    map[types.UID]bool{},
		failed:    map[types.UID]podFailure{},
		admitted:  map[types.UID]bool{},
		starts:    newPodStarts(c.Metrics),
		running:   make(chan struct{}),
	}
	if k.prober == nil {
		k.prober = noProber{}
	}
	if k.sysctls, err = sysctl.New(c.AllowedUnsafeSysctls); err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	k.objects = objectcache.New(c.Client, k.log)
	k.volumes = volumes.New(c.RootDir, c.NodeName, c.Client, k.objects, k.log)
	k.volumes.NodeAllocatable = k.nodeAllocatable
	k.status = status.NewManager(c.Client, k.log)
	return k, nil
}

// Run watches the node's pods and runs them until ctx is cancelled; it returns nil then (after the pod
// workers stopped), or earlier an error that stops the kubelet (its directories cannot be created, the
// runtime does not answer CRI Version). Pods keep running when Run returns: a later Kubelet's Run
// adopts them. Run may be called once per Kubelet.
func (k *Kubelet) Run(ctx context.Context) error {
	k.mu.Lock()
	if k.started {
		k.mu.Unlock()
		return errors.New("kubelet: Run called twice")
	}
	k.started = true
	k.mu.Unlock()
	for _, d := range []string{k.cfg.RootDir, k.cfg.PodLogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
	}
	runtime := k.cfg.Metrics.InstrumentRuntime(k.cfg.Runtime)
	svcFactory := informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0, informers.WithTransform(dropManagedFields))
	k.services = svcFactory.Core().V1().Services().Lister()
	runtimeClasses := svcFactory.Node().V1().RuntimeClasses()
	classes := runtimeClasses.Lister()
	rm, err := kuberuntime.New(ctx, kuberuntime.Options{
		Runtime: runtime, Images: k.cfg.Metrics.InstrumentImages(k.cfg.Images), Recorder: k.recorderOrDefault(ctx), Helper: k,
		PodLogsDir: k.cfg.PodLogsDir, PodContainerDir: k.podContainerDir, CgroupRoot: k.cfg.CgroupRoot, CgroupDriver: k.cfg.CgroupDriver,
		CrashLoopBackOff: k.cfg.CrashLoopBackOff, MaxCrashLoopBackOff: k.cfg.MaxCrashLoopBackOff,
		ImagePullBackOff: k.cfg.ImagePullBackOff, MaxImagePullBackOff: k.cfg.MaxImagePullBackOff,
		SerializeImagePulls: k.cfg.SerializeImagePulls, MaxPerPodContainer: k.cfg.MaxPerPodContainer, Log: k.log,
		RuntimeHandler: func(pod *v1.Pod) (string, error) { return runtimeHandler(classes, pod) },
	})
	if err != nil {
		return fmt.Errorf("kubelet: runtime: %w", err)
	}
	k.runtime = rm
	k.runtimeReady.Store(rm)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	k.pleg = pleg.New(runtime, k.cfg.RelistPeriod, k.log)
	if m := k.cfg.Metrics; m != nil {
		k.pleg.OnRelist(func(d time.Duration) { m.PLEGRelistDuration.Observe(d.Seconds()) })
	}
	k.workers = podworkers.New(ctx, k, k.cfg.SyncFrequency, 5*time.Second, k.log)
	defer k.objects.Stop() // after the workers stopped (deferred calls run last first)
	defer k.workers.Wait()

	podFactory := informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0, informers.WithTransform(dropManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
		}))
	podInformer := podFactory.Core().V1().Pods().Informer()
	k.apiPods = podFactory.Core().V1().Pods().Lister()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { k.podUpdated(nil, obj.(*v1.Pod)) },
		UpdateFunc: func(oldObj, newObj any) {
			k.podUpdated(oldObj.(*v1.Pod), newObj.(*v1.Pod))
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				k.podRemoved(p)
			}
		},
	}); err != nil {
		return fmt.Errorf("kubelet: pod informer: %w", err)
	}
	svcFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	defer svcFactory.Shutdown()
	defer podFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, svcFactory.Core().V1().Services().Informer().HasSynced,
		runtimeClasses.Informer().HasSynced) {
		return nil
	}
	k.log.Info("kubelet pod sync started", "runtime", rm.RuntimeName(), "podLogsDir", k.cfg.PodLogsDir, "rootDir", k.cfg.RootDir)
	go k.pleg.Run(ctx)
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); k.status.Run(ctx, status.ReconcilePeriod, k.apiPod) }()
	defer func() { cancel(); <-statusDone }()
	managers, err := k.startNodeManagers(ctx, k.recorderOrDefault(ctx))
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	defer func() { cancel(); managers.Wait() }()
	close(k.running)

	housekeeping := time.NewTicker(k.cfg.HousekeepingPeriod)
	defer housekeeping.Stop()
	gc := time.NewTicker(k.cfg.GCPeriod)
	defer gc.Stop()
	k.housekeeping(ctx)
	k.networkGC(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-k.pleg.Events():
			if p := k.desiredPod(e.PodUID); p != nil {
				k.workers.UpdatePod(podworkers.UpdatePodOptions{Pod: p})
			}
		case r, ok := <-k.prober.Results():
			if ok {
				k.handleProbeResult(r)
			}
		case <-housekeeping.C:
			k.housekeeping(ctx)
		case <-gc.C:
			if err := k.runtime.GarbageCollect(ctx, k.isActive); err != nil && ctx.Err() == nil {
				k.log.Warn("container garbage collection", "err", err)
			}
			k.networkGC(ctx)
		}
	}
}

// dropManagedFields is the informers' transform: an object's managedFields (server-side apply's
// bookkeeping, often the largest part of its metadata) are never read on the node, so they are not cached.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// networkGC runs Config.NetworkGC through the runtime manager (see kuberuntime.Manager.NetworkGC).
func (k *Kubelet) networkGC(ctx context.Context) {
	if k.cfg.NetworkGC == nil {
		return
	}
	ran, err := k.runtime.NetworkGC(ctx, k.cfg.NetworkGC)
	switch {
	case err != nil && ctx.Err() == nil:
		k.log.Warn("pod network garbage collection", "err", err)
	case !ran:
		k.log.Debug("pod network garbage collection deferred: a sandbox is being created")
	}
}

// recorderOrDefault returns Config.Recorder or an event recorder writing through the API client.
func (k *Kubelet) recorderOrDefault(ctx context.Context) record.EventRecorder {
	if k.recorder != nil {
		return k.recorder
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.cfg.Client.CoreV1().Events("")})
	k.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: k.cfg.NodeName})
	return k.recorder
}

// Pods returns the pods this kubelet runs (API pods bound to the node and static pods), each a copy
// carrying the latest status the kubelet computed.
func (k *Kubelet) Pods() []*v1.Pod {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(k.pods))
	for _, p := range k.pods {
		out = append(out, k.withStatus(p))
	}
	return out
}

// GetPodByName returns a copy of the pod namespace/name this kubelet runs, and whether it is known.
func (k *Kubelet) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, p := range k.pods {
		if p.Namespace == namespace && p.Name == name {
			return k.withStatus(p), true
		}
	}
	return nil, false
}

func (k *Kubelet) withStatus(p *v1.Pod) *v1.Pod {
	c := p.DeepCopy()
	if s, ok := k.status.GetPodStatus(p.UID); ok {
		c.Status = s
	}
	return c
}

// SetStaticPods replaces the set of static pods (from --pod-manifest-path; it satisfies
// kubelet/static.Sink): each must carry its UID (derived from its source, stable across restarts) and
// the annotation kubernetes.io/config.source (e.g. "file"); pods without them are logged and skipped.
// New ones start, changed ones are synced, ones left out are terminated and removed. Their status goes
// to their mirror pod (same namespace/name, annotation kubernetes.io/config.mirror) when the node half
// has created it; mirror pods themselves are never run. It waits until Run has started.
func (k *Kubelet) SetStaticPods(pods []*v1.Pod) {
	<-k.running
	keep := map[types.UID]bool{}
	for _, p := range pods {
		if p.UID == "" || !status.IsStatic(p) {
			k.log.Error("static pod rejected: needs a UID and the "+status.ConfigSourceAnnotation+" annotation", "pod", p.Namespace+"/"+p.Name)
			continue
		}
		keep[p.UID] = true
		k.mu.Lock()
		old := k.pods[p.UID]
		k.static[p.UID] = true
		k.mu.Unlock()
		k.podUpdated(old, p)
	}
	k.mu.RLock()
	var gone []*v1.Pod
	for uid := range k.static {
		if p := k.pods[uid]; !keep[uid] && p != nil {
			gone = append(gone, p)
		}
	}
	k.mu.RUnlock()
	for _, p := range gone {
		k.podRemoved(p)
	}
}

// podUpdated handles a new or changed desired pod. Changes of status alone (mostly the kubelet's own
// writes) do not wake the worker.
func (k *Kubelet) podUpdated(old, pod *v1.Pod) {
	if _, mirror := pod.Annotations[status.ConfigMirrorAnnotation]; mirror {
		return
	}
	k.mu.Lock()
	k.pods[pod.UID] = pod
	k.mu.Unlock()
	k.starts.seen(pod, time.Now())
	if old != nil && old.UID == pod.UID && specEqual(old, pod) {
		if !reflect.DeepEqual(old.Status, pod.Status) {
			k.status.Notify(pod.UID) // someone else may have written it
		}
		return
	}
	k.starts.updated(pod.UID)
	k.objects.RegisterPod(pod) // before its worker reads them
	k.workers.UpdatePod(podworkers.UpdatePodOptions{Pod: pod})
}

func specEqual(a, b *v1.Pod) bool {
	return reflect.DeepEqual(a.Spec, b.Spec) && reflect.DeepEqual(a.Labels, b.Labels) &&
		reflect.DeepEqual(a.Annotations, b.Annotations) && reflect.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) &&
		reflect.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds)
}

// podRemoved handles a pod gone from its source: its worker terminates it (with its deletion grace
// period, if any) and removes its remains.
func (k *Kubelet) podRemoved(pod *v1.Pod) {
	if _, mirror := pod.Annotations[status.ConfigMirrorAnnotation]; mirror {
		return
	}
	k.mu.Lock()
	delete(k.pods, pod.UID)
	delete(k.static, pod.UID)
	delete(k.admitted, pod.UID)
	k.mu.Unlock()
	k.objects.UnregisterPod(pod.UID)
	k.workers.UpdatePod(podworkers.UpdatePodOptions{Pod: pod, Removed: true})
}

func (k *Kubelet) desiredPod(uid types.UID) *v1.Pod {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.pods[uid]
}

// isActive: the pod is desired or still has a worker (its containers are managed, not garbage).
func (k *Kubelet) isActive(uid types.UID) bool {
	if k.desiredPod(uid) != nil {
		return true
	}
	_, ok := k.workers.State(uid)
	return ok
}

func (k *Kubelet) handleProbeResult(r results.Update) {
	if r.Result == results.Failure && (r.Probe == results.Liveness || r.Probe == results.Startup) && r.ContainerID != "" {
		probe := kuberuntime.LivenessProbe
		if r.Probe == results.Startup {
			probe = kuberuntime.StartupProbe
		}
		k.mu.Lock()
		k.unhealthy[r.ContainerID] = probe
		k.mu.Unlock()
		k.log.Info("container failed its probe, killing it", "podUID", r.PodUID, "container", r.ContainerName,
			"containerID", r.ContainerID, "probe", probe, "message", r.Message)
	}
	p := k.desiredPod(r.PodUID)
	if p == nil {
		return
	}
	if state, ok := k.workers.State(p.UID); ok && state == podworkers.Terminating && r.Probe == results.Readiness && r.ContainerID != "" {
		// The worker is busy stopping the pod: write the readiness change directly.
		go func() {
			if err := k.status.SetContainerReadiness(context.Background(), p, r.ContainerID, r.Result == results.Success); err != nil {
				k.log.Warn("write readiness of a terminating pod", "pod", p.Namespace+"/"+p.Name, "container", r.ContainerName, "err", err)
			}
		}()
	}
	k.workers.UpdatePod(podworkers.UpdatePodOptions{Pod: p})
}

func (k *Kubelet) unhealthyFunc(containerID string) (kuberuntime.FailedProbe, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	m, ok := k.unhealthy[containerID]
	return m, ok
}

// housekeeping terminates and removes what the runtime runs for pods no source has (orphans: pods
// deleted while the kubelet was down, or containers made behind its back with pod labels), and removes
// pod directories and log directories left by pods that are gone.
func (k *Kubelet) housekeeping(ctx context.Context) {
	running, err := k.runtime.GetPods(ctx)
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("housekeeping: list runtime pods", "err", err)
		}
		return
	}
	inRuntime := map[types.UID]bool{}
	for _, rp := range running {
		inRuntime[rp.UID] = true
		if k.isActive(rp.UID) {
			continue
		}
		k.log.Info("terminating orphaned pod", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.UID)
		orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
		k.workers.UpdatePod(podworkers.UpdatePodOptions{Pod: orphan, Removed: true, GracePeriod: rp.GracePeriod})
	}
	dirs, err := k.volumes.PodDirs()
	if err != nil {
		k.log.Warn("housekeeping: list pod dirs", "err", err)
	}
	for _, uid := range dirs {
		if !inRuntime[uid] && !k.isActive(uid) {
			if err := k.volumes.RemovePodDir(uid); err != nil {
				k.log.Warn("housekeeping: remove orphaned pod dir", "podUID", uid, "err", err)
			}
		}
	}
	logs, _ := os.ReadDir(k.cfg.PodLogsDir)
	for _, e := range logs {
		uid := podUIDFromLogDir(e.Name())
		if uid == "" || inRuntime[uid] || k.isActive(uid) {
			continue
		}
		if err := os.RemoveAll(k.cfg.PodLogsDir + "/" + e.Name()); err != nil {
			k.log.Warn("housekeeping: remove orphaned pod logs", "dir", e.Name(), "err", err)
		}
	}
}

// podUIDFromLogDir parses <ns>_<name>_<uid>.
func podUIDFromLogDir(name string) types.UID {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '_' {
			return types.UID(name[i+1:])
		}
	}
	return ""
}

// hostIPs are Config.NodeIPs, else the Node's InternalIP addresses (re-read at most every 30 s).
func (k *Kubelet) hostIPs(ctx context.Context) []string {
	var out []string
	for _, ip := range k.cfg.NodeIPs {
		out = append(out, ip.String())
	}
	if len(out) > 0 {
		return out
	}
	if n := k.getNode(ctx); n != nil {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP && net.ParseIP(a.Address) != nil {
				out = append(out, a.Address)
			}
		}
	}
	return out
}

func (k *Kubelet) getNode(ctx context.Context) *v1.Node {
	k.mu.RLock()
	n, at := k.node, k.nodeAt
	k.mu.RUnlock()
	if n != nil && time.Since(at) < 30*time.Second {
		return n
	}
	got, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nodeAt = time.Now()
	if err == nil {
		k.node = got
	}
	return k.node
}

func (k *Kubelet) nodeAllocatable() v1.ResourceList {
	if n := k.getNode(context.Background()); n != nil {
		return n.Status.Allocatable
	}
	return nil
}

// PodCgroupStats reads the CPU and memory usage of the pod's cgroup (kuberuntime.Manager.PodCgroupStats)
// for /stats/summary; ok is false before Run has started the runtime manager or when the pod has no
// cgroup the kubelet manages.
func (k *Kubelet) PodCgroupStats(uid types.UID) (cgroups.Stats, bool) {
	rm := k.runtimeReady.Load()
	if rm == nil {
		return cgroups.Stats{}, false
	}
	return rm.PodCgroupStats(uid)
}
