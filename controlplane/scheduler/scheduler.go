// Package scheduler is nodekit's bundled pod scheduler. It watches pods that have no node and name
// this scheduler (spec.schedulerName, "default-scheduler" by default), filters the nodes that can run
// each one (Ready and schedulable, resources, nodeSelector and required node affinity, taints and
// tolerations, host ports, spec.nodeName, topology spread constraints, required inter-pod affinity and
// anti-affinity, the existing pods' anti-affinity), scores the feasible ones (least allocated,
// topology spread with upstream's system default constraints, preferred inter-pod and node affinity,
// PreferNoSchedule taints; upstream's default weights) and binds
// the pod to the best through the pods/binding subresource. A pod no node fits gets
// PodScheduled=False, reason Unschedulable, with a message counting why nodes failed, and is tried
// again when nodes or pods change. Pods are taken in spec.priority order, and a pod no node fits
// preempts pods of lower priority (upstream's DefaultPreemption: see preemption.go). It talks only to the API server, through client-go informers
// and a rate-limited work queue, like kube-scheduler.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/nodekit/nodekit/internal/podspec"
)

// DefaultSchedulerName is the spec.schedulerName the API server defaults pods to.
const DefaultSchedulerName = v1.DefaultSchedulerName

// Options configure a Scheduler. Zero values take the defaults given per field.
type Options struct {
	// SchedulerName is the spec.schedulerName this scheduler serves (default "default-scheduler");
	// pods naming any other scheduler are left alone.
	SchedulerName string
	// BindWorkers bounds the bindings in flight at once (default 16).
	BindWorkers int
	// RetryInterval is how often pods parked as unschedulable are tried again even without a node or
	// pod change (default 60 s).
	RetryInterval time.Duration
	// Logger receives one line per scheduling event (default slog.Default()).
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.SchedulerName == "" {
		o.SchedulerName = DefaultSchedulerName
	}
	if o.BindWorkers <= 0 {
		o.BindWorkers = 16
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Scheduler places pending pods on nodes. Build it with New and start it with Run.
type Scheduler struct {
	client    kubernetes.Interface
	opts      Options
	log       *slog.Logger
	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	pdbLister policylisters.PodDisruptionBudgetLister
	lookups   lookups
	logger    logr.Logger
	cache     *cache
	queue     workqueue.TypedRateLimitingInterface[string]
	filters   []filter
	// volumeBinding checks and binds the pods' PersistentVolumeClaims (filter and PreBind).
	volumeBinding *volumeBinding
	rnd           *rand.Rand
	recorder      record.EventRecorder
	bindSem       chan struct{}
	bindWG        sync.WaitGroup
	// handlersSynced report when our event handlers have received the informers' initial lists.
	handlersSynced []toolscache.InformerSynced

	mu sync.Mutex
	// moveCycle is bumped by every change that may make any parked pod fit; podMoveCycle by changes
	// of assigned pods and namespaces, which only matter to pods with inter-pod affinity or topology
	// spread constraints.
	moveCycle, podMoveCycle int64
	// unschedulable holds the parked pod keys until the next move; the value says whether the pod
	// also waits on other pods (inter-pod affinity, spread constraints).
	unschedulable map[string]bool
}

// moveCycles is the pair of move counters a scheduling cycle started at.
type moveCycles struct{ all, pods int64 }

// Run builds a scheduler for client and runs it until ctx is done (see New and Scheduler.Run).
func Run(ctx context.Context, client kubernetes.Interface, opts Options) error {
	s, err := New(client, opts)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// New returns a scheduler over client with its informers registered but not started.
func New(client kubernetes.Interface, opts Options) (*Scheduler, error) {
	if client == nil {
		return nil, errors.New("scheduler: client is nil")
	}
	opts.setDefaults()
	logger := logr.FromSlogHandler(opts.Logger.Handler())
	s := &Scheduler{
		client:        client,
		opts:          opts,
		log:           opts.Logger.With("component", "scheduler", "scheduler", opts.SchedulerName),
		factory:       informers.NewSharedInformerFactory(client, 0),
		cache:         newCache(),
		logger:        logger,
		filters:       filters(logger),
		rnd:           rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		bindSem:       make(chan struct{}, opts.BindWorkers),
		unschedulable: map[string]bool{},
	}
	// The active queue pops the highest spec.priority first (upstream's PrioritySort).
	active := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Queue: newPriorityQueue(s.keyPriority)})
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "scheduler",
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Queue: active})})
	podInformer := s.factory.Core().V1().Pods()
	s.podLister = podInformer.Lister()
	podReg, err := podInformer.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onPodAdd(obj.(*v1.Pod)) },
		UpdateFunc: func(oldObj, newObj any) { s.onPodUpdate(oldObj.(*v1.Pod), newObj.(*v1.Pod)) },
		DeleteFunc: s.onPodDelete,
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: pod event handler: %w", err)
	}
	nodeReg, err := s.factory.Core().V1().Nodes().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.cache.setNode(obj.(*v1.Node)); s.moveAllToActive("NodeAdd") },
		UpdateFunc: func(oldObj, newObj any) { s.onNodeUpdate(oldObj.(*v1.Node), newObj.(*v1.Node)) },
		DeleteFunc: s.onNodeDelete,
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: node event handler: %w", err)
	}
	core, apps := s.factory.Core().V1(), s.factory.Apps().V1()
	nsReg, err := core.Namespaces().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.movePodWaiters("NamespaceAdd") },
		UpdateFunc: func(oldObj, newObj any) {
			if !equality.Semantic.DeepEqual(oldObj.(*v1.Namespace).Labels, newObj.(*v1.Namespace).Labels) {
				s.movePodWaiters("NamespaceLabelUpdate")
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: namespace event handler: %w", err)
	}
	s.lookups = &listerLookups{
		namespaces:   core.Namespaces().Lister(),
		services:     core.Services().Lister(),
		rcs:          core.ReplicationControllers().Lister(),
		replicaSets:  apps.ReplicaSets().Lister(),
		statefulSets: apps.StatefulSets().Lister(),
	}
	pdbs := s.factory.Policy().V1().PodDisruptionBudgets()
	s.pdbLister = pdbs.Lister()
	s.handlersSynced = []toolscache.InformerSynced{pdbs.Informer().HasSynced, podReg.HasSynced, nodeReg.HasSynced, nsReg.HasSynced,
		core.Services().Informer().HasSynced, core.ReplicationControllers().Informer().HasSynced,
		apps.ReplicaSets().Informer().HasSynced, apps.StatefulSets().Informer().HasSynced}
	vb, synced, err := newVolumeBinding(s.factory, s.moveAllToActive)
	if err != nil {
		return nil, err
	}
	s.volumeBinding = vb
	s.filters = append(s.filters, filter{"VolumeBinding", vb.filter})
	s.handlersSynced = append(s.handlersSynced, synced...)
	return s, nil
}

// Run starts the informers, waits for their caches, then schedules one pod at a time (bindings run
// concurrently) until ctx is done. It returns nil on a clean stop.
func (s *Scheduler) Run(ctx context.Context) error {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	s.recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: s.opts.SchedulerName})

	defer s.queue.ShutDown()
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	// Wait until our handlers have seen every initial Node, Pod and Namespace (not only until the
	// informers' stores are filled), and the default spreading's Services and controllers are listed,
	// so the first pods are scheduled against the whole cluster.
	if !toolscache.WaitForCacheSync(ctx.Done(), s.handlersSynced...) {
		return fmt.Errorf("scheduler: caches did not sync: %w", ctx.Err())
	}
	s.log.Info("scheduler started")
	go func() {
		t := time.NewTicker(s.opts.RetryInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.moveAllToActive("RetryInterval")
			}
		}
	}()
	go func() { <-ctx.Done(); s.queue.ShutDown() }()
	for s.processNext(ctx) {
	}
	s.bindWG.Wait()
	return nil
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// keyPriority returns the spec.priority of the pod named key (0 when it is unknown or has none).
func (s *Scheduler) keyPriority(key string) int32 {
	ns, name, err := toolscache.SplitMetaNamespaceKey(key)
	if err != nil || s.podLister == nil {
		return 0
	}
	pod, err := s.podLister.Pods(ns).Get(name)
	if err != nil {
		return 0
	}
	return corev1helpers.PodPriority(pod)
}

// responsibleFor reports whether pod waits for this scheduler: no node yet, this scheduler's name,
// no scheduling gates, not being deleted, not finished. A gated pod is kept out of the queue; the update
// that removes its last gate makes it responsibleFor and queues it (onPodUpdate).
func (s *Scheduler) responsibleFor(pod *v1.Pod) bool {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	return pod.Spec.NodeName == "" && name == s.opts.SchedulerName && len(pod.Spec.SchedulingGates) == 0 && pod.DeletionTimestamp == nil &&
		!podspec.IsTerminal(pod.Status.Phase)
}

func (s *Scheduler) onPodAdd(pod *v1.Pod) {
	key := podKey(pod)
	s.cache.setPod(key, pod)
	if occupiesNode(pod) {
		s.movePodWaiters("AssignedPodAdd")
	}
	if s.responsibleFor(pod) {
		s.queue.Add(key)
	}
}

func (s *Scheduler) onPodUpdate(oldPod, newPod *v1.Pod) {
	key := podKey(newPod)
	s.cache.setPod(key, newPod)
	switch was, is := occupiesNode(oldPod), occupiesNode(newPod); {
	case was && !is:
		s.moveAllToActive("PodFinished")
	case !was && is:
		s.movePodWaiters("AssignedPodAdd")
	case was && is && !equality.Semantic.DeepEqual(oldPod.Labels, newPod.Labels):
		s.movePodWaiters("AssignedPodLabelUpdate")
	}
	if !s.responsibleFor(newPod) {
		s.dropParked(key)
		return
	}
	s.mu.Lock()
	_, parked := s.unschedulable[key]
	s.mu.Unlock()
	// A parked pod is retried when its scheduling inputs change, not on its own status writes.
	if parked && equality.Semantic.DeepEqual(oldPod.Spec, newPod.Spec) && equality.Semantic.DeepEqual(oldPod.Labels, newPod.Labels) {
		return
	}
	s.dropParked(key)
	s.queue.Add(key)
}

func (s *Scheduler) onPodDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key := podKey(pod)
	s.cache.removePod(key)
	s.dropParked(key)
	if pod.Spec.NodeName != "" {
		s.moveAllToActive("AssignedPodDelete")
	}
}

func (s *Scheduler) onNodeUpdate(oldNode, newNode *v1.Node) {
	s.cache.setNode(newNode)
	if nodeSchedulingChanged(oldNode, newNode) {
		s.moveAllToActive("NodeUpdate")
	}
}

func (s *Scheduler) onNodeDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		s.cache.removeNode(node.Name)
	}
}

// nodeSchedulingChanged reports whether a node update can change a filter's answer; heartbeats that
// only refresh timestamps do not.
func nodeSchedulingChanged(a, b *v1.Node) bool {
	return a.Spec.Unschedulable != b.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		readyStatus(a) != readyStatus(b)
}

func readyStatus(n *v1.Node) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return v1.ConditionUnknown
}

// moveAllToActive puts every parked pod back in the active queue after an event that may let it fit.
func (s *Scheduler) moveAllToActive(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moveCycle++
	s.podMoveCycle++
	if len(s.unschedulable) == 0 {
		return
	}
	s.log.Debug("retrying unschedulable pods", "event", event, "pods", len(s.unschedulable))
	for key := range s.unschedulable {
		s.queue.Add(key)
	}
	clear(s.unschedulable)
}

// movePodWaiters puts the parked pods that wait on other pods (inter-pod affinity, topology spread)
// back in the active queue after an assigned pod or a namespace changed; the others stay parked.
func (s *Scheduler) movePodWaiters(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.podMoveCycle++
	moved := 0
	for key, waitsOnPods := range s.unschedulable {
		if waitsOnPods {
			s.queue.Add(key)
			delete(s.unschedulable, key)
			moved++
		}
	}
	if moved > 0 {
		s.log.Debug("retrying unschedulable pods", "event", event, "pods", moved)
	}
}

// waitsOnPods reports whether other pods' placement or labels can change where pod fits: it has
// inter-pod affinity or topology spread constraints, or it could match an existing pod's
// anti-affinity (every pod can, so a pod refused only by that is retried on pod events too).
func waitsOnPods(pod *v1.Pod, fitErr *fitError) bool {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return true
	}
	for _, reasons := range fitErr.NodeReasons {
		for _, r := range reasons {
			if r == ReasonExistingPodsAntiAffinity {
				return true
			}
		}
	}
	return false
}

func (s *Scheduler) dropParked(key string) {
	s.mu.Lock()
	delete(s.unschedulable, key)
	s.mu.Unlock()
}

// park holds an unschedulable pod until the next move event that concerns it; if one already
// happened while the pod was being scheduled (its cycle is stale), the pod is retried after a backoff
// instead.
func (s *Scheduler) park(key string, cycle moveCycles, podWaiter bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cycle.all < s.moveCycle || (podWaiter && cycle.pods < s.podMoveCycle) {
		s.queue.AddRateLimited(key)
		return
	}
	s.unschedulable[key] = podWaiter
}

func (s *Scheduler) processNext(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	if err := s.scheduleOne(ctx, key); err != nil {
		s.log.Warn("scheduling attempt failed, will retry", "pod", key, "err", err)
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// scheduleOne runs one scheduling cycle for the pod named key: filter, score, assume, bind (async).
func (s *Scheduler) scheduleOne(ctx context.Context, key string) error {
	ns, name, err := toolscache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := s.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !s.responsibleFor(pod) || s.cache.isAssumed(key) {
		return nil
	}
	s.mu.Lock()
	cycle := moveCycles{all: s.moveCycle, pods: s.podMoveCycle}
	s.mu.Unlock()

	nodeName, fitErr := s.findNode(pod)
	if fitErr != nil {
		nominated, msg, err := s.preempt(ctx, pod, fitErr)
		if err != nil {
			return err
		}
		fitErr.PostFilterMsg = msg
		if nominated != "" {
			s.cache.nominate(key, pod, nominated)
		}
		s.park(key, cycle, waitsOnPods(pod, fitErr))
		return s.recordUnschedulable(ctx, pod, fitErr, nominated)
	}
	s.cache.assume(key, pod, nodeName)
	s.bindWG.Add(1)
	s.bindSem <- struct{}{}
	go func() {
		defer s.bindWG.Done()
		defer func() { <-s.bindSem }()
		s.bind(ctx, key, pod, nodeName)
	}()
	return nil
}

// cycleLocked returns the cycle context for pod over every node of the cache (cache lock held).
func (s *Scheduler) cycleLocked(pod *v1.Pod) *cycleContext {
	cc := &cycleContext{pod: newPodInfo(pod), lookups: s.lookups, logger: s.logger}
	for _, ni := range s.cache.nodes {
		if ni.Node != nil {
			cc.nodes = append(cc.nodes, ni)
		}
	}
	return cc
}

// withNominated returns ni with the nominated pods of at least priority prio added (a copy; ni itself
// when there are none), so that a pod does not take room preemption made for a more important one
// (upstream's RunFilterPluginsWithNominatedPods).
func withNominated(ni *nodeInfo, nominated []*podInfo, prio int32) *nodeInfo {
	var out *nodeInfo
	for _, pi := range nominated {
		if corev1helpers.PodPriority(pi.Pod) < prio {
			continue
		}
		if out == nil {
			out = ni.clone()
		}
		out.addPod(podKey(pi.Pod), pi)
	}
	if out == nil {
		return ni
	}
	return out
}

// findNode returns the best node for pod, or a fitError saying why every node failed. A pod nominated
// to a node by an earlier preemption goes there when it fits (upstream's evaluateNominatedNode).
func (s *Scheduler) findNode(pod *v1.Pod) (string, *fitError) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	cc := s.cycleLocked(pod)
	fitErr := &fitError{NumAllNodes: len(cc.nodes), NodeReasons: map[string][]string{}}
	fs, err := cycleFilters(s.filters, cc)
	if err != nil {
		fitErr.PreFilterMsg = err.Error()
		return "", fitErr
	}
	nominated := s.cache.nominatedByNodeLocked(podKey(pod))
	prio := corev1helpers.PodPriority(pod)
	var feasible []*nodeInfo
	for _, ni := range cc.nodes {
		if reasons := runFilters(fs, cc.pod, withNominated(ni, nominated[ni.Node.Name], prio)); reasons != nil {
			fitErr.NodeReasons[ni.Node.Name] = reasons
			continue
		}
		if ni.Node.Name == pod.Status.NominatedNodeName {
			return ni.Node.Name, nil
		}
		feasible = append(feasible, ni)
	}
	if len(feasible) == 0 {
		return "", fitErr
	}
	best, err := selectHost(cc, feasible, s.rnd)
	if err != nil {
		fitErr.PreFilterMsg = err.Error()
		return "", fitErr
	}
	return feasible[best].Node.Name, nil
}

// bind posts the pods/binding subresource; on failure the assumption is dropped and the pod retried.
func (s *Scheduler) bind(ctx context.Context, key string, pod *v1.Pod, nodeName string) {
	if err := s.preBind(ctx, pod, nodeName); err != nil {
		s.cache.forget(key)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("volume binding failed, will retry", "pod", key, "node", nodeName, "err", err)
		s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "running PreBind plugin \"VolumeBinding\": %v", err)
		s.queue.AddRateLimited(key)
		return
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		s.cache.forget(key)
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		s.log.Warn("binding failed, will retry", "pod", key, "node", nodeName, "err", err)
		s.queue.AddRateLimited(key)
		return
	}
	s.log.Info("pod scheduled", "pod", key, "node", nodeName)
	s.recorder.Eventf(pod, v1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", key, nodeName)
}

// recordUnschedulable sets PodScheduled=False reason Unschedulable with fitErr's message and, when
// preemption made room there, status.nominatedNodeName (written only when they change), and emits a
// FailedScheduling event.
func (s *Scheduler) recordUnschedulable(ctx context.Context, pod *v1.Pod, fitErr *fitError, nominated string) error {
	msg := fitErr.Error()
	s.log.Info("pod unschedulable", "pod", podKey(pod), "reason", msg)
	s.recorder.Event(pod, v1.EventTypeWarning, "FailedScheduling", msg)
	cond := v1.PodCondition{
		Type:    v1.PodScheduled,
		Status:  v1.ConditionFalse,
		Reason:  v1.PodReasonUnschedulable,
		Message: msg,
	}
	updated := pod.DeepCopy()
	changed := setPodCondition(&updated.Status, cond)
	if nominated != "" && updated.Status.NominatedNodeName != nominated {
		updated.Status.NominatedNodeName, changed = nominated, true
	}
	if !changed {
		return nil
	}
	_, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set PodScheduled=False on %s: %w", podKey(pod), err)
	}
	return nil
}

// setPodCondition sets cond in status, keeping lastTransitionTime when the status does not change.
// It reports whether anything changed.
func setPodCondition(status *v1.PodStatus, cond v1.PodCondition) bool {
	now := metav1.Now()
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return false
		}
		cond.LastProbeTime = now
		cond.LastTransitionTime = c.LastTransitionTime
		if c.Status != cond.Status {
			cond.LastTransitionTime = now
		}
		*c = cond
		return true
	}
	cond.LastProbeTime, cond.LastTransitionTime = now, now
	status.Conditions = append(status.Conditions, cond)
	return true
}
