// Package nodestatus is the node half of the kubelet's contact with the API server: it registers the
// Node object, keeps the node's Lease in kube-node-lease renewed (the heartbeat the node lifecycle
// controller watches), posts NodeStatus when it changes and at least every report period, and reads back
// spec.podCIDRs for the network configuration.
//
// Behaviour follows upstream's kubelet (pkg/kubelet/kubelet_node_status.go and nodestatus setters):
//   - registration creates the Node with labels kubernetes.io/hostname, kubernetes.io/os,
//     kubernetes.io/arch (and the beta.kubernetes.io/ twins), --node-labels and --register-with-taints;
//     if the Node exists, only the default labels and the controller-managed attach-detach annotation are
//     reconciled on it, as upstream does;
//   - the Lease (holderIdentity = node name, leaseDurationSeconds, ownerReference to the Node) is renewed
//     every leaseDuration/4, through k8s.io/component-helpers' lease controller, the one upstream uses;
//   - NodeStatus is computed every update period and patched (strategic merge on the status
//     subresource) when anything other than heartbeat times changed, or when the report period elapsed;
//   - Ready follows CRI Status: a failed Status call means "container runtime is down: <error>", a
//     RuntimeReady=false or NetworkReady=false condition is reported with the runtime's reason and
//     message. Config.NetworkStatus adds the node's own check of the CNI plugin for runtimes that do
//     not run CNI STATUS themselves (containerd 1.x), reported as the runtime would: NetworkReady=false
//     reason:NetworkPluginNotReady message:Network plugin returns error: <the plugin's error>. Upstream waits 30 s of failed runtime checks before reporting the runtime down; nodekit
//     reports it at the first failed check (one update period), the Lease already guards against flaps.
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	nodeutil "k8s.io/component-helpers/node/util"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/version"
)

// Defaults of Config's periods; they are upstream's KubeletConfiguration defaults.
const (
	DefaultUpdateFrequency      = 10 * time.Second
	DefaultReportFrequency      = 5 * time.Minute
	DefaultLeaseDurationSeconds = 40
	DefaultMaxPods              = 110
	// LeaseNamespace holds the node Leases.
	LeaseNamespace = v1.NamespaceNodeLease
	// nodeStatusMaxImages is how many images NodeStatus lists (upstream's nodeStatusMaxImages).
	nodeStatusMaxImages = 50
)

// Upstream's default hard eviction thresholds, subtracted from capacity to get allocatable
// (memory.available<100Mi, nodefs.available<10%).
var (
	evictionHardMemory         = resource.MustParse("100Mi")
	evictionHardNodefsFraction = 0.10
)

// RuntimeService is the part of the CRI RuntimeService the node status needs;
// runtimeapi.RuntimeServiceClient (runtime/cri.Client.Runtime()) satisfies it.
type RuntimeService interface {
	Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error)
}

// ImageService is the part of the CRI ImageService the node status needs (the images list);
// runtimeapi.ImageServiceClient satisfies it.
type ImageService interface {
	ListImages(ctx context.Context, in *runtimeapi.ListImagesRequest, opts ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error)
}

// Pressure is the eviction manager's view of the node (kubelet.Kubelet has it).
type Pressure interface {
	IsUnderMemoryPressure() bool
	IsUnderDiskPressure() bool
	IsUnderPIDPressure() bool
}

// Config configures a Controller. NodeName, Client and Runtime are required.
type Config struct {
	// NodeName is the Node's name; also the Lease name and holderIdentity.
	NodeName string
	// Hostname is the kubernetes.io/hostname label and the Hostname address (default NodeName).
	Hostname string
	// Client is the API client, normally authenticated as system:node:<NodeName>.
	Client kubernetes.Interface
	// Runtime answers CRI Version and Status; Images (optional) lists images for status.images.
	Runtime RuntimeService
	Images  ImageService
	// NetworkStatus (optional) checks the pod network's CNI plugin on each update; an error makes the
	// node NotReady with NetworkReady=false reason NetworkPluginNotReady and the error as message, as
	// containerd 2.x reports a failing CNI STATUS. Nil: CRI Status alone decides.
	NetworkStatus func(ctx context.Context) error
	// NodeIP is the InternalIP address (--node-ip). Nil: DefaultRouteIP().
	NodeIP net.IP
	// Labels (--node-labels) and Taints (--register-with-taints) are set at registration.
	Labels map[string]string
	// Annotations are set at registration and reconciled on an existing Node (the agent's local-path
	// storage directory, localpath.NodeDirAnnotation). Optional.
	Annotations map[string]string
	Taints      []v1.Taint
	// Machine describes the host (capacity and nodeInfo); required (see ReadMachine).
	Machine *Machine
	// MaxPods is the pods capacity (default 110).
	MaxPods int32
	// KubeletPort is status.daemonEndpoints.kubeletEndpoint.port (the kubelet server's port).
	KubeletPort int32
	// UpdateFrequency is how often status is computed (nodeStatusUpdateFrequency, default 10s);
	// ReportFrequency the longest time between two posts of an unchanged status
	// (nodeStatusReportFrequency, default 5m); LeaseDurationSeconds the Lease's duration
	// (nodeLeaseDurationSeconds, default 40), renewed every quarter of it.
	UpdateFrequency      time.Duration
	ReportFrequency      time.Duration
	LeaseDurationSeconds int32
	// Pressure reports the MemoryPressure, DiskPressure and PIDPressure conditions (the kubelet's
	// eviction manager). Nil: all three False.
	Pressure Pressure
	// OnPodCIDRs is called (from the status goroutine) whenever the Node's spec.podCIDRs becomes known
	// or changes, with the new list. Optional.
	OnPodCIDRs func(cidrs []string)
	// Logger gets one line per event (node= key). Nil: slog.Default().
	Logger *slog.Logger
	// Clock is for tests; nil means the real clock.
	Clock clock.WithTicker
}

// Controller registers the Node and keeps its Lease and status current. Create it with New and start it
// with Run.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu             sync.Mutex
	nodeUID        types.UID
	podCIDRs       []string
	runtimeVersion string
	lastReport     time.Time
	registered     chan struct{}
}

// New validates cfg and fills defaults. Errors name the missing field.
func New(cfg Config) (*Controller, error) {
	var errs []error
	if cfg.NodeName == "" {
		errs = append(errs, errors.New("nodestatus: NodeName is required"))
	}
	if cfg.Client == nil {
		errs = append(errs, errors.New("nodestatus: Client is required"))
	}
	if cfg.Runtime == nil {
		errs = append(errs, errors.New("nodestatus: Runtime (CRI RuntimeService) is required"))
	}
	if cfg.Machine == nil {
		errs = append(errs, errors.New("nodestatus: Machine is required (see ReadMachine)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.NodeName
	}
	if cfg.NodeIP == nil {
		ip, err := DefaultRouteIP()
		if err != nil {
			return nil, fmt.Errorf("nodestatus: node IP: %w", err)
		}
		cfg.NodeIP = ip
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = DefaultMaxPods
	}
	if cfg.UpdateFrequency <= 0 {
		cfg.UpdateFrequency = DefaultUpdateFrequency
	}
	if cfg.ReportFrequency <= 0 {
		cfg.ReportFrequency = DefaultReportFrequency
	}
	if cfg.LeaseDurationSeconds <= 0 {
		cfg.LeaseDurationSeconds = DefaultLeaseDurationSeconds
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Controller{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeName), registered: make(chan struct{})}, nil
}

// Run registers the Node (retrying with back-off until it succeeds or ctx ends), then renews the Lease
// and updates the status until ctx is cancelled; it returns ctx's error.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.registerWithBackoff(ctx); err != nil {
		return err
	}
	close(c.registered)
	renew := time.Duration(c.cfg.LeaseDurationSeconds) * time.Second / 4
	lc := lease.NewController(c.cfg.Clock, c.cfg.Client, c.cfg.NodeName, c.cfg.LeaseDurationSeconds, nil,
		renew, c.cfg.NodeName, LeaseNamespace, c.setNodeOwner)
	go lc.Run(ctx)

	t := c.cfg.Clock.NewTicker(c.cfg.UpdateFrequency)
	defer t.Stop()
	for {
		if err := c.UpdateStatus(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("node status update failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Registered is closed once the Node exists in the API (created or found).
func (c *Controller) Registered() <-chan struct{} { return c.registered }

// PodCIDRs returns the Node's spec.podCIDRs as last read (nil until the node IPAM controller sets them).
func (c *Controller) PodCIDRs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.podCIDRs)
}

// setNodeOwner makes the Node own the Lease, so deleting the Node deletes its Lease (upstream's
// setNodeOwnerFunc).
func (c *Controller) setNodeOwner(l *coordinationv1.Lease) error {
	if len(l.OwnerReferences) > 0 {
		return nil
	}
	c.mu.Lock()
	uid := c.nodeUID
	c.mu.Unlock()
	if uid == "" {
		return errors.New("node UID not known yet")
	}
	l.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: c.cfg.NodeName, UID: uid,
	}}
	return nil
}

func (c *Controller) registerWithBackoff(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		err := c.register(ctx)
		if err == nil {
			return nil
		}
		c.log.Error("node registration failed, retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.cfg.Clock.After(delay):
		}
		delay = min(2*delay, 7*time.Second)
	}
}

// register creates the Node, or reconciles an existing one (upstream's tryRegisterWithAPIServer).
func (c *Controller) register(ctx context.Context) error {
	nodes := c.cfg.Client.CoreV1().Nodes()
	want := c.initialNode(ctx)
	created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		c.log.Info("node registered", "uid", created.UID)
		c.observe(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node: %w", err)
	}
	existing, err := nodes.Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get existing node: %w", err)
	}
	updated := existing.DeepCopy()
	changed := reconcileDefaultLabels(want, updated)
	for k, v := range want.Annotations {
		if updated.Annotations[k] != v {
			if updated.Annotations == nil {
				updated.Annotations = map[string]string{}
			}
			updated.Annotations[k] = v
			changed = true
		}
	}
	if changed {
		if existing, _, err = nodeutil.PatchNodeStatus(c.cfg.Client.CoreV1(), types.NodeName(c.cfg.NodeName), existing, updated); err != nil {
			return fmt.Errorf("reconcile existing node: %w", err)
		}
	}
	c.log.Info("node already registered, reconciled", "uid", existing.UID, "changed", changed)
	c.observe(existing)
	return nil
}

const annotationControllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"

// defaultLabels are the labels the kubelet owns and reconciles on an existing Node.
func (c *Controller) defaultLabels() map[string]string {
	return map[string]string{
		v1.LabelHostname:          c.cfg.Hostname,
		v1.LabelOSStable:          runtime.GOOS,
		v1.LabelArchStable:        runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
}

// reconcileDefaultLabels sets the default labels of want on existing; it reports whether it changed it.
func reconcileDefaultLabels(want, existing *v1.Node) bool {
	changed := false
	for _, k := range []string{v1.LabelHostname, v1.LabelOSStable, v1.LabelArchStable, "beta.kubernetes.io/os", "beta.kubernetes.io/arch"} {
		if v := want.Labels[k]; existing.Labels[k] != v {
			if existing.Labels == nil {
				existing.Labels = map[string]string{}
			}
			existing.Labels[k] = v
			changed = true
		}
	}
	return changed
}

// initialNode is the Node object registration creates (upstream's initialNode).
func (c *Controller) initialNode(ctx context.Context) *v1.Node {
	labels := map[string]string{}
	for k, v := range c.cfg.Labels {
		labels[k] = v
	}
	for k, v := range c.defaultLabels() {
		labels[k] = v
	}
	annotations := map[string]string{annotationControllerManagedAttachDetach: "true"}
	for k, v := range c.cfg.Annotations {
		annotations[k] = v
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        c.cfg.NodeName,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: v1.NodeSpec{Taints: slices.Clone(c.cfg.Taints)},
	}
	c.setStatus(ctx, n, c.runtimeReadiness(ctx))
	return n
}

// observe records what the controller needs from the Node as the API returned it.
func (c *Controller) observe(n *v1.Node) {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	c.mu.Lock()
	c.nodeUID = n.UID
	changed := !slices.Equal(cidrs, c.podCIDRs)
	c.podCIDRs = slices.Clone(cidrs)
	c.mu.Unlock()
	if changed && len(cidrs) > 0 {
		c.log.Info("node podCIDRs set", "podCIDRs", cidrs)
		if c.cfg.OnPodCIDRs != nil {
			c.cfg.OnPodCIDRs(slices.Clone(cidrs))
		}
	}
}

// UpdateStatus reads the Node, computes its status and patches it when it changed or when the report
// period has elapsed since the last post (upstream's tryUpdateNodeStatus). It also picks up podCIDRs.
func (c *Controller) UpdateStatus(ctx context.Context) error {
	node, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node: %w", err)
	}
	c.observe(node)
	updated := node.DeepCopy()
	c.setStatus(ctx, updated, c.runtimeReadiness(ctx))
	c.mu.Lock()
	due := c.cfg.Clock.Since(c.lastReport) >= c.cfg.ReportFrequency
	c.mu.Unlock()
	if !due && !statusChanged(&node.Status, &updated.Status) {
		return nil
	}
	if _, _, err := nodeutil.PatchNodeStatus(c.cfg.Client.CoreV1(), types.NodeName(c.cfg.NodeName), node, updated); err != nil {
		return err
	}
	c.mu.Lock()
	c.lastReport = c.cfg.Clock.Now()
	c.mu.Unlock()
	if _, old := nodeutil.GetNodeCondition(&node.Status, v1.NodeReady); old == nil || readyOf(updated).Status != old.Status || readyOf(updated).Message != old.Message {
		r := readyOf(updated)
		c.log.Info("node Ready condition", "status", r.Status, "reason", r.Reason, "message", r.Message)
	}
	return nil
}

func readyOf(n *v1.Node) *v1.NodeCondition {
	_, c := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	return c
}

// resources computes a node's capacity and allocatable as upstream's MachineInfo setter: the kubelet's
// own resources (machine) overwrite theirs in the capacity the Node already has, which keeps the
// resources others advertise there (an extended resource patched into status.capacity, as an operator
// or the e2e framework's AddExtendedResource does); allocatable is the capacity less reserved (floored
// at 0) for every resource, and an extended resource gone from the capacity leaves allocatable too.
// The lists given are not modified.
func resources(oldCapacity, oldAllocatable, machine, reserved v1.ResourceList) (capacity, allocatable v1.ResourceList) {
	capacity = oldCapacity.DeepCopy()
	if capacity == nil {
		capacity = v1.ResourceList{}
	}
	maps.Copy(capacity, machine)
	allocatable = oldAllocatable.DeepCopy()
	if allocatable == nil {
		allocatable = v1.ResourceList{}
	}
	for k := range allocatable {
		if _, ok := capacity[k]; !ok && podspec.IsExtendedResourceName(k) {
			delete(allocatable, k)
		}
	}
	for k, v := range capacity {
		value := v.DeepCopy()
		if r, ok := reserved[k]; ok {
			value.Sub(r)
		}
		if value.Sign() < 0 {
			value.Set(0)
		}
		allocatable[k] = value
	}
	return capacity, allocatable
}

// statusChanged reports whether the statuses differ in anything but the conditions' heartbeat times
// (upstream's nodeStatusHasChanged).
func statusChanged(a, b *v1.NodeStatus) bool {
	strip := func(s *v1.NodeStatus) *v1.NodeStatus {
		s = s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// runtimeReadiness asks the runtime for its status; it returns the reasons the node is not ready, in
// upstream's wording ("container runtime is down: …", "container runtime not ready: RuntimeReady=false
// reason:… message:…", "container runtime network not ready: NetworkReady=false reason:… message:…").
// It also refreshes the runtime version.
func (c *Controller) runtimeReadiness(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.UpdateFrequency/2, time.Second))
	defer cancel()
	resp, err := c.cfg.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return []string{"container runtime is down: " + err.Error()}
	}
	if v, err := c.cfg.Runtime.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"}); err == nil {
		c.mu.Lock()
		c.runtimeVersion = v.GetRuntimeName() + "://" + v.GetRuntimeVersion()
		c.mu.Unlock()
	}
	var problems []string
	conds := map[string]*runtimeapi.RuntimeCondition{}
	for _, rc := range resp.GetStatus().GetConditions() {
		conds[rc.Type] = rc
	}
	for _, t := range []struct{ typ, what string }{
		{runtimeapi.RuntimeReady, "container runtime not ready"},
		{runtimeapi.NetworkReady, "container runtime network not ready"},
	} {
		rc := conds[t.typ]
		if rc == nil {
			problems = append(problems, fmt.Sprintf("%s: %s condition missing from CRI Status", t.what, t.typ))
		} else if !rc.Status {
			problems = append(problems, fmt.Sprintf("%s: %s=false reason:%s message:%s", t.what, t.typ, rc.Reason, rc.Message))
		} else if t.typ == runtimeapi.NetworkReady && c.cfg.NetworkStatus != nil {
			if err := c.cfg.NetworkStatus(ctx); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s=false reason:NetworkPluginNotReady message:Network plugin returns error: %v", t.what, t.typ, err))
			}
		}
	}
	return problems
}

// setStatus fills n.Status from the machine, the runtime and the given not-ready reasons.
func (c *Controller) setStatus(ctx context.Context, n *v1.Node, notReady []string) {
	m := c.cfg.Machine
	n.Status.Capacity, n.Status.Allocatable = resources(n.Status.Capacity, n.Status.Allocatable, v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(m.NumCPU), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(int64(c.cfg.MaxPods), resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(m.EphemeralStorageBytes, resource.BinarySI),
	}, v1.ResourceList{
		v1.ResourceMemory:           evictionHardMemory,
		v1.ResourceEphemeralStorage: *resource.NewQuantity(m.EphemeralStorageBytes-int64(float64(m.EphemeralStorageBytes)*(1-evictionHardNodefsFraction)), resource.BinarySI),
	})

	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: c.cfg.NodeIP.String()},
		{Type: v1.NodeHostName, Address: c.cfg.Hostname},
	}
	c.mu.Lock()
	rv := c.runtimeVersion
	c.mu.Unlock()
	if rv == "" {
		rv = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	n.Status.NodeInfo = v1.NodeSystemInfo{
		MachineID:               m.MachineID,
		SystemUUID:              m.SystemUUID,
		BootID:                  m.BootID,
		KernelVersion:           m.KernelVersion,
		OSImage:                 m.OSImage,
		ContainerRuntimeVersion: rv,
		KubeletVersion:          version.Version,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = c.cfg.KubeletPort
	if imgs := c.images(ctx); imgs != nil {
		n.Status.Images = imgs
	}

	now := metav1.NewTime(c.cfg.Clock.Now())
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if len(notReady) > 0 {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: strings.Join(notReady, ", ")}
	}
	for _, cond := range append(c.pressureConditions(), ready) {
		setCondition(&n.Status, cond, now)
	}
}

// pressureConditions are MemoryPressure, DiskPressure and PIDPressure from Config.Pressure, with
// upstream's reasons and messages (pkg/kubelet/nodestatus MemoryPressureCondition etc.).
func (c *Controller) pressureConditions() []v1.NodeCondition {
	p := c.cfg.Pressure
	cond := func(t v1.NodeConditionType, on bool, trueReason, trueMsg, falseReason, falseMsg string) v1.NodeCondition {
		if on {
			return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: trueReason, Message: trueMsg}
		}
		return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: falseReason, Message: falseMsg}
	}
	return []v1.NodeCondition{
		cond(v1.NodeMemoryPressure, p != nil && p.IsUnderMemoryPressure(),
			"KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
			"KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(v1.NodeDiskPressure, p != nil && p.IsUnderDiskPressure(),
			"KubeletHasDiskPressure", "kubelet has disk pressure",
			"KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(v1.NodePIDPressure, p != nil && p.IsUnderPIDPressure(),
			"KubeletHasInsufficientPID", "kubelet has insufficient PID available",
			"KubeletHasSufficientPID", "kubelet has sufficient PID available"),
	}
}

// setCondition sets cond's status, reason and message with heartbeat now, keeping the last transition
// time unless the status changed.
func setCondition(s *v1.NodeStatus, cond v1.NodeCondition, now metav1.Time) {
	cond.LastHeartbeatTime = now
	cond.LastTransitionTime = now
	i, old := nodeutil.GetNodeCondition(s, cond.Type)
	if old == nil {
		s.Conditions = append(s.Conditions, cond)
		return
	}
	if old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	s.Conditions[i] = cond
}

// images lists the runtime's images for status.images, largest first, at most nodeStatusMaxImages
// (upstream's images setter). Nil when there is no ImageService or the call fails.
func (c *Controller) images(ctx context.Context) []v1.ContainerImage {
	if c.cfg.Images == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.UpdateFrequency/2, time.Second))
	defer cancel()
	resp, err := c.cfg.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil
	}
	imgs := resp.GetImages()
	sort.SliceStable(imgs, func(i, j int) bool { return imgs[i].GetSize() > imgs[j].GetSize() })
	out := []v1.ContainerImage{}
	for _, img := range imgs {
		if len(out) == nodeStatusMaxImages {
			break
		}
		names := append(slices.Clone(img.GetRepoDigests()), img.GetRepoTags()...)
		if len(names) == 0 {
			continue
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
	}
	return out
}
